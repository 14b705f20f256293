// `npm run bench`: see scripts/bench/main.ts (issue 6).
import { main } from './bench/main.ts';

main().then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    console.error(`bench failed: ${(err as Error)?.stack ?? String(err)}`);
    process.exitCode = 1;
  },
);
