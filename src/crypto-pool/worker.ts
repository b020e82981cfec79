import { type CryptoTask, type MaterialResult, runTask } from './tasks.ts'

/** Piscina worker entry: one task per call. */
export default function worker(task: CryptoTask): MaterialResult {
  return runTask(task)
}
