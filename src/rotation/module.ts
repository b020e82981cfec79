import type { Module } from '../platform/module.ts'
import { rotationJobs } from './rotation-jobs.ts'
import { rotationRoutes } from './rotation-routes.ts'
import type { RotationService } from './rotation-service.ts'

/** Rotation policies of keys and their scheduled rotations. */
export function rotationModule(deps: { rotation: RotationService }): Module {
  return { name: 'rotation', routes: rotationRoutes(deps.rotation), jobs: rotationJobs(deps) }
}
