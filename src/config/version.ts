// Kept equal to package.json's version by a unit test; printed by --version and at start-up.
export const VERSION = '0.2.0';

declare const PROXY_COMMIT: string | undefined;
/** The source commit the bundle was built from (build.mjs defines it, `-dirty` and all); `unknown` run from source. */
export const COMMIT: string = typeof PROXY_COMMIT === 'string' ? PROXY_COMMIT : 'unknown';
