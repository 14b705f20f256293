// A refused push's answer in git's report-status (src/git/push-report.ts), the host's own report
// read from its answer without changing it, and the record of a push's ref updates (record.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PushCapabilities } from '../../src/git/push-commands.ts';
import { HostReportReader, refusalExplanation, refusalReport } from '../../src/git/push-report.ts';
import { pushRecord } from '../../src/git/record.ts';
import { FLUSH, pkt } from '../support/push-bodies.ts';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const CAPS: PushCapabilities = { reportStatus: true, reportStatusV2: false, sideBand: false, pushOptions: false };
const commands = [
  { old: A, new: B, ref: 'refs/heads/main' },
  { old: A, new: B, ref: 'refs/heads/agent/x' },
];

/** pkt-lines' data, read back (null for a flush). */
function lines(bytes: Buffer): (string | null)[] {
  const out: (string | null)[] = [];
  for (let at = 0; at < bytes.length; ) {
    const length = parseInt(bytes.toString('latin1', at, at + 4), 16);
    out.push(length === 0 ? null : bytes.toString('latin1', at + 4, at + length));
    at += length === 0 ? 4 : length;
  }
  return out;
}

test('ref rules, refusal: a refused push is answered as receive-pack answers one a hook declined: unpack ok, then ng for every ref, the refused ones with their reason', () => {
  const report = refusalReport(CAPS, commands, ['git-auth-proxy: refs/heads/main is protected', undefined], 'git-auth-proxy: the push is refused as a whole', []);
  assert.deepEqual(lines(report!), ['unpack ok\n', 'ng refs/heads/main git-auth-proxy: refs/heads/main is protected\n', 'ng refs/heads/agent/x git-auth-proxy: the push is refused as a whole\n', null]);
  // report-status-v2 alone is a report too.
  assert.ok(refusalReport({ ...CAPS, reportStatus: false, reportStatusV2: true }, commands, [], 'x', []));
  // No report asked for: the caller gives its plain refusal.
  assert.equal(refusalReport({ ...CAPS, reportStatus: false }, commands, [], 'x', []), undefined);
  // No command read (an unreadable list): the reason is the unpack status, which git prints.
  assert.deepEqual(lines(refusalReport(CAPS, [], [], 'git-auth-proxy: too many', [])!), ['unpack git-auth-proxy: too many\n', null]);
  // A name that would break its line keeps its place.
  assert.deepEqual(lines(refusalReport(CAPS, [{ old: A, new: B, ref: 'refs/heads/x\n' }], ['why'], 'w', [])!)[1], 'ng refs/heads/x? why\n');
});

test('ref rules, refusal: with side-band-64k the explanation goes on band 2 (git prints it as remote:) and the report inside band 1, split to fit a packet', () => {
  const report = refusalReport({ ...CAPS, sideBand: true }, commands, ['git-auth-proxy: refused'], 'whole', refusalExplanation('github.com', ['refs/heads/main is protected', undefined]))!;
  const outer = lines(report);
  assert.deepEqual(outer.slice(0, 2), ['\x02git-auth-proxy: push refused, nothing was sent to github.com:\n', '\x02git-auth-proxy:   refs/heads/main is protected\n']);
  assert.equal(outer.at(-1), null);
  const band1 = Buffer.concat(outer.filter((l): l is string => l !== null && l.startsWith('\x01')).map((l) => Buffer.from(l.slice(1), 'latin1')));
  assert.deepEqual(lines(band1), ['unpack ok\n', 'ng refs/heads/main git-auth-proxy: refused\n', 'ng refs/heads/agent/x whole\n', null]);
  // A report larger than one side-band packet is split across several, each within 65520 bytes.
  const many = Array.from({ length: 900 }, (_, i) => ({ old: A, new: B, ref: `refs/heads/${'n'.repeat(60)}${i}` }));
  const big = refusalReport({ ...CAPS, sideBand: true }, many, [], 'whole', [])!;
  const packets = lines(big).filter((l): l is string => l !== null);
  assert.ok(packets.length > 1 && packets.every((p) => p.length + 4 <= 65520));
  assert.equal(lines(Buffer.concat(packets.map((p) => Buffer.from(p.slice(1), 'latin1')))).length, 902);
  // Past twenty reasons the explanation counts the rest.
  assert.equal(refusalExplanation('h', Array(25).fill('r')).at(-1), 'git-auth-proxy:   and 5 more');
});

test("ref rules, record: the host's report is read from its answer, in band 1 or plain, wherever its bytes are split; progress and report-status-v2 options are skipped", () => {
  const report = Buffer.concat([pkt('unpack ok\n'), pkt('ok refs/heads/agent/x\n'), pkt('option refname refs/heads/agent/x\n'), pkt('ng refs/heads/other non-fast-forward\n'), FLUSH]);
  const banded = Buffer.concat([pkt(Buffer.concat([Buffer.from([2]), Buffer.from('Resolving deltas\n')])), pkt(Buffer.concat([Buffer.from([1]), report.subarray(0, 20)])), pkt(Buffer.concat([Buffer.from([1]), report.subarray(20)])), FLUSH]);
  const expected = { unpack: 'ok', refs: [{ ref: 'refs/heads/agent/x', status: 'ok' }, { ref: 'refs/heads/other', status: 'ng non-fast-forward' }], unreadable: false };
  for (const [bytes, sideBand] of [[report, false], [banded, true]] as const) {
    for (let at = 0; at <= bytes.length; at++) {
      const reader = new HostReportReader(sideBand);
      reader.push(bytes.subarray(0, at));
      reader.push(bytes.subarray(at));
      assert.deepEqual(reader.report, expected, `side band ${sideBand}, split at ${at}`);
    }
  }
  const garbage = new HostReportReader(false);
  garbage.push(Buffer.from('<html>not a report</html>'));
  assert.deepEqual(garbage.report, { unpack: undefined, refs: [], unreadable: true });
});

test('ref rules, record: every ref update is listed (ref, old, new), with why the proxy refused it and what the host reported', () => {
  const reader = new HostReportReader(false);
  reader.push(Buffer.concat([pkt('unpack ok\n'), pkt('ng refs/heads/agent/x stale info\n'), pkt('ok refs/heads/main\n'), FLUSH]));
  const head = { commands, capabilities: CAPS, certified: false };
  assert.deepEqual(pushRecord({ head, refusals: [], hostReport: () => reader.report }), {
    refs: [
      { ref: 'refs/heads/main', old: A, new: B, refused: null, result: 'ok' },
      { ref: 'refs/heads/agent/x', old: A, new: B, refused: null, result: 'ng stale info' },
    ],
    unpack: 'ok',
  });
  assert.deepEqual(pushRecord({ head: { ...head, certified: true }, refusals: ['protected', undefined] }), {
    refs: [
      { ref: 'refs/heads/main', old: A, new: B, refused: 'protected', result: null },
      { ref: 'refs/heads/agent/x', old: A, new: B, refused: null, result: null },
    ],
    certified: true,
  });
  assert.deepEqual(pushRecord({ unread: 'the body has a Content-Encoding' }), { refs: [], unread: 'the body has a Content-Encoding' });
});
