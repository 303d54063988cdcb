import { fileURLToPath } from 'node:url';
import './guard.mjs';

// Node processes the fast tier's tests start (the CLI under tsx, workers) carry the guard too.
const guard = fileURLToPath(new URL('./guard.mjs', import.meta.url));
const flag = `--import=${guard}`;
if (!(process.env.NODE_OPTIONS ?? '').includes(flag))
  process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} ${flag}`.trim();
