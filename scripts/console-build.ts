// npm run console:build (and npm start, before the service): builds the web console unless
// console/dist is current. `--force` builds whatever the stamp says.
import { buildConsole } from '../src/console/console-build.ts'

const { built } = await buildConsole({
  force: process.argv.includes('--force'),
  log: (line) => process.stderr.write(`${line}\n`),
})
process.stderr.write(built ? 'console built: console/dist\n' : 'console is current: console/dist\n')
