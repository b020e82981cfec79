import { type CryptoTask, runTask, type TaskResult } from './tasks.ts'

/** Piscina worker entry: one task per call. */
export default function worker(task: CryptoTask): TaskResult {
  return runTask(task)
}
