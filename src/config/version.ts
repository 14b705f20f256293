// Kept equal to package.json's version by a unit test; printed by --version and at start-up.
export const VERSION = '0.2.0';
