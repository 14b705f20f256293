import type { Metafile } from 'esbuild';

export const BUILD_INPUTS: readonly string[];

export interface Provenance {
  readonly version: string;
  /** package.json's "license", an SPDX identifier (Apache-2.0). */
  readonly license: string;
  /** `git rev-parse HEAD`, `<sha>-dirty` with uncommitted changes to a build input, or 'unknown' outside git. */
  readonly commit: string;
  readonly sourcesSha256: string;
  readonly lockfileSha256: string;
  readonly esbuild: string;
}

export interface Bundle {
  readonly outfile: string;
  readonly bytes: Buffer;
  readonly text: string;
  readonly sha256: string;
  readonly header: string;
  readonly provenance: Provenance;
  readonly metafile: Metafile;
  readonly requires: readonly string[];
  /** Each bundled file (src/...) and its text. */
  readonly sources: Readonly<Record<string, string>>;
}

export function sourcesSha256(root: string): string;
export function provenance(root: string): Provenance;
export function bundleHeader(p: Provenance): string;
export function buildBundle(options: { root: string; outfile: string }): Promise<Bundle>;
