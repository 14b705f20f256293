// The command list at the head of a push, read as git's receive-pack reads it (src/git/push-commands.ts):
// every form git accepts, every form it dies on, the proxy's own bounds, and the same verdict
// wherever the bytes are split.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { featureValue, MAX_COMMANDS, MAX_HEAD_BYTES, MAX_LINE_BYTES, PushHeadReader, type PushHeadVerdict } from '../../src/git/push-commands.ts';
import { certificateLines, commandLine, emptyPack, FLUSH, GIT_CAPS, oid, pkt, pushBody, ZERO } from '../support/push-bodies.ts';

const A = oid(1);
const B = oid(2);

/** The verdict for a body given whole, then ended. */
function readWhole(body: Buffer, end = true): PushHeadVerdict {
  const reader = new PushHeadReader();
  const verdict = reader.push(body);
  return verdict.kind === 'more' && end ? reader.end() : verdict;
}

/** The refs read (as `old new ref` lines), or the reason the list is unreadable. */
function summary(v: PushHeadVerdict): string[] | string {
  if (v.kind === 'read') return v.head.commands.map((c) => `${c.old} ${c.new} ${c.ref}`);
  return v.kind === 'unreadable' ? `unreadable: ${v.reason}` : 'more';
}

const cat = (...parts: (Buffer | string)[]) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : p)));

test('push commands: a push as git 2.39 sends it is read whole: commands, capabilities, the pack start', () => {
  const v = readWhole(pushBody([{ old: A, new: B, ref: 'refs/heads/main' }, { old: ZERO, new: B, ref: 'refs/heads/agent/run-42/x' }], `${GIT_CAPS} atomic push-options`, cat(pkt('ci.skip'), FLUSH, emptyPack())), false);
  assert.equal(v.kind, 'read');
  assert.deepEqual(summary(v), [`${A} ${B} refs/heads/main`, `${ZERO} ${B} refs/heads/agent/run-42/x`]);
  assert.deepEqual(v.kind === 'read' && v.head.capabilities, { reportStatus: true, reportStatusV2: false, sideBand: true, pushOptions: true });
});

test('push commands: upper-case hex is read as git reads it, in the pkt-line lengths and in the object ids (recorded in lower case)', () => {
  const line = commandLine(A.toUpperCase(), B.toUpperCase(), 'refs/heads/main', GIT_CAPS);
  const v = readWhole(cat(pkt(line, 'upper'), FLUSH, emptyPack()), false);
  assert.deepEqual(summary(v), [`${A} ${B} refs/heads/main`]);
  // 0x3A bytes of line: its length field written 003A (upper) and 003a (lower) say the same.
  const short = commandLine(A, B, 'refs/heads/abcdefgh');
  assert.equal(pkt(short, 'upper').toString('latin1', 0, 4), '006A');
  assert.deepEqual(summary(readWhole(cat(pkt(short, 'upper'), FLUSH, 'PACK'), false)), [`${A} ${B} refs/heads/abcdefgh`]);
});

test('push commands: a pkt-line length is exactly 4 hex digits: signs, spaces, 0x and other letters are refused, never read another way', () => {
  for (const digits of ['+05a', ' 05a', '0x5a', '05g0', '-001', '05A\0', '1e3 ']) {
    const v = readWhole(cat(digits, commandLine(A, B, 'refs/heads/main', GIT_CAPS), FLUSH));
    assert.match(summary(v) as string, /unreadable: a pkt-line length is not 4 hex digits/, JSON.stringify(digits));
  }
});

test('push commands: lying lengths: 0001 and 0002 are refused (git ends the list there too), 0003 and a line past the bound are refused, a length past the body ends unread', () => {
  const line = pkt(commandLine(A, B, 'refs/heads/agent/x', GIT_CAPS));
  assert.match(summary(readWhole(cat(line, '0001', pkt(commandLine(A, B, 'refs/heads/main')), FLUSH, 'PACK'))) as string, /delim pkt-line/);
  assert.match(summary(readWhole(cat(line, '0002', FLUSH, 'PACK'))) as string, /response-end pkt-line/);
  assert.match(summary(readWhole(cat(line, '0003', FLUSH))) as string, /a pkt-line length of 3/);
  assert.match(summary(readWhole(cat((MAX_LINE_BYTES + 1).toString(16).padStart(4, '0'), 'x'.repeat(MAX_LINE_BYTES)))) as string, /more than 4096/);
  // A length that claims the rest of the body and more: the list never ends.
  assert.match(summary(readWhole(cat(line, '0fff', commandLine(A, B, 'refs/heads/main'), FLUSH, 'PACK'))) as string, /the body ended before the command list did/);
});

test('push commands: the capability list is what lies between the first and the second NUL; the name ends at the first NUL', () => {
  const v = readWhole(cat(pkt(`${A} ${B} refs/heads/agent/x\0report-status\0side-band-64k refs/heads/main\n`), FLUSH, 'PACK'), false);
  assert.deepEqual(summary(v), [`${A} ${B} refs/heads/agent/x`]);
  assert.deepEqual(v.kind === 'read' && v.head.capabilities.sideBand, false, 'what follows the second NUL is no capability');
  // A capability on a later line still counts, as it does for git.
  const later = readWhole(cat(pkt(commandLine(A, B, 'refs/heads/a')), pkt(commandLine(A, B, 'refs/heads/b', 'report-status')), FLUSH, 'PACK'), false);
  assert.equal(later.kind === 'read' && later.head.capabilities.reportStatus, true);
  // A NUL inside the ids ends the line there: not a command.
  assert.match(summary(readWhole(cat(pkt(`${A.slice(0, 20)}\0${A.slice(21)} ${B} refs/heads/x\n`), FLUSH, 'PACK'))) as string, /not "<old id> <new id> <ref>"/);
});

test('push commands: a name keeps every byte git keeps (spaces, a second LF), only one trailing LF is dropped', () => {
  const v = readWhole(cat(pkt(`${A} ${B} refs/heads/a b\n\n`), pkt(`${A} ${B} \n`), FLUSH, 'PACK'), false);
  assert.deepEqual(summary(v), [`${A} ${B} refs/heads/a b\n`, `${A} ${B} `]);
});

test('push commands: shallow lines are not commands; one without an object id is fatal', () => {
  const v = readWhole(cat(pkt(`shallow ${oid(9)}\n`), pkt(commandLine(A, B, 'refs/heads/x', GIT_CAPS)), pkt(`shallow ${oid(8)}trailing\0caps\n`), FLUSH, 'PACK'), false);
  assert.deepEqual(summary(v), [`${A} ${B} refs/heads/x`]);
  assert.equal(v.kind === 'read' && v.head.capabilities.sideBand, true);
  assert.match(summary(readWhole(cat(pkt('shallow nothex\n'), FLUSH, 'PACK'))) as string, /shallow line without an object id/);
  // `shallow ` and no more is no shallow line: a malformed command.
  assert.match(summary(readWhole(cat(pkt('shallow \n'), FLUSH, 'PACK'))) as string, /not "<old id> <new id> <ref>"/);
});

test('push commands: a push certificate\'s commands are read, whether or not the host asked for one, with the unsigned ones around it', () => {
  const signature = '-----BEGIN PGP SIGNATURE-----\n';
  const body = cat(...certificateLines([`${A} ${B} refs/heads/main\n`, `${ZERO} ${B} refs/tags/v1\n`], GIT_CAPS, signature), FLUSH, emptyPack());
  const v = readWhole(body, false);
  assert.deepEqual(summary(v), [`${A} ${B} refs/heads/main`, `${ZERO} ${B} refs/tags/v1`]);
  assert.equal(v.kind === 'read' && v.head.certified, true);
  const mixed = readWhole(cat(pkt(commandLine(A, B, 'refs/heads/agent/x', GIT_CAPS)), ...certificateLines([`${A} ${B} refs/heads/main\n`]).slice(0), FLUSH, 'PACK'), false);
  assert.deepEqual(summary(mixed), [`${A} ${B} refs/heads/agent/x`, `${A} ${B} refs/heads/main`]);
});

test('push commands: a certificate\'s lines join as git joins them: a line without LF runs into the next, a NUL cuts its line, a flush ends cert and list, only the last signature line ends the commands', () => {
  const head = [pkt(`push-cert\0${GIT_CAPS}\n`), pkt('certificate version 0.1\n'), pkt('\n')];
  // The name split over two pkt-lines is one name.
  const split = readWhole(cat(...head, pkt(`${A} ${B} refs/he`), pkt('ads/main\n'), pkt('push-cert-end\n'), FLUSH, 'PACK'), false);
  assert.deepEqual(summary(split), [`${A} ${B} refs/heads/main`]);
  // A NUL cuts what its pkt-line adds: `refs/heads/agent/x` + `\0junk` + `/main` is refs/heads/agent/x/main.
  const nul = readWhole(cat(...head, pkt(`${A} ${B} refs/heads/agent/x\0junk`), pkt('/main\n'), pkt('push-cert-end\n\0more'), FLUSH, 'PACK'), false);
  assert.deepEqual(summary(nul), [`${A} ${B} refs/heads/agent/x/main`]);
  // A flush inside the certificate ends the list; the commands are read up to it.
  const flushed = readWhole(cat(...head, pkt(`${A} ${B} refs/heads/main\n`), FLUSH, 'PACK'), false);
  assert.deepEqual(summary(flushed), [`${A} ${B} refs/heads/main`]);
  // Two signature starts: the commands end at the last one, so a line between them is a command.
  const twice = readWhole(cat(...head, pkt(`${A} ${B} refs/heads/a\n`), pkt('-----BEGIN SSH SIGNATURE-----\n'), pkt(`${A} ${B} refs/heads/main\n`), pkt('-----BEGIN PGP SIGNATURE-----\n'), pkt('sig\n'), pkt('push-cert-end\n'), FLUSH, 'PACK'));
  assert.match(summary(twice) as string, /not "<old id> <new id> <ref>"/, 'the first signature line is read as a command, and is none');
  // `push-cert-end` without its LF does not end the certificate.
  const noLf = readWhole(cat(...head, pkt(`${A} ${B} refs/heads/a\n`), pkt('push-cert-end'), FLUSH, 'PACK'));
  assert.match(summary(noLf) as string, /not "<old id> <new id> <ref>"/);
  // No blank line after the header: fatal for git.
  const noBlank = readWhole(cat(pkt(`push-cert\0${GIT_CAPS}\n`), pkt('certificate version 0.1\n'), pkt(`${A} ${B} refs/heads/main\n`), pkt('push-cert-end\n'), FLUSH, 'PACK'));
  assert.match(summary(noBlank) as string, /without the blank line/);
});

test('push commands: an ERR line is fatal, as it is for git', () => {
  assert.match(summary(readWhole(cat(pkt(commandLine(A, B, 'refs/heads/x', GIT_CAPS)), pkt('ERR something\n'), FLUSH, 'PACK'))) as string, /an ERR pkt-line/);
});

test('push commands: after the list only a pack, or the end of the body, may come: a second list after the flush is refused', () => {
  const first = pkt(commandLine(A, B, 'refs/heads/agent/x', GIT_CAPS));
  assert.match(summary(readWhole(cat(first, FLUSH, pkt(commandLine(A, B, 'refs/heads/main')), FLUSH, emptyPack()))) as string, /neither a pack nor the end of the body/);
  assert.match(summary(readWhole(cat(first, FLUSH, 'PACX'))) as string, /neither a pack/);
  // A deletion needs no pack: the body may end after the flush.
  const deletion = readWhole(cat(pkt(commandLine(A, ZERO, 'refs/heads/agent/x', GIT_CAPS)), FLUSH));
  assert.deepEqual(summary(deletion), [`${A} ${ZERO} refs/heads/agent/x`]);
  // No flush before the pack: the pack's bytes are no pkt-line.
  assert.match(summary(readWhole(cat(first, emptyPack()))) as string, /not 4 hex digits/);
  // Push options, when asked for, come before the pack; a command list there would be options.
  const options = readWhole(cat(pkt(commandLine(A, B, 'refs/heads/x', `${GIT_CAPS} push-options`)), FLUSH, pkt('ci.skip'), pkt(commandLine(A, B, 'refs/heads/main')), FLUSH, emptyPack()), false);
  assert.deepEqual(summary(options), [`${A} ${B} refs/heads/x`]);
});

test('push commands: an empty list (git\'s probe of a large push, 0000) is read as no command, whatever follows', () => {
  assert.deepEqual(summary(readWhole(FLUSH)), []);
});

test('push commands: the body ending inside the list is unreadable (git dies at that end too)', () => {
  const whole = pushBody([{ old: A, new: B, ref: 'refs/heads/x' }]);
  for (let at = 0; at < whole.length - emptyPack().length - 4; at++) {
    assert.equal(readWhole(whole.subarray(0, at)).kind, 'unreadable', `cut at ${at}`);
  }
});

test('push commands: object formats: sha256 ids with object-format=sha256; lists that disagree, or an unknown format, are refused', () => {
  const long = (n: number) => oid(n, 64);
  const v = readWhole(cat(pkt(commandLine(long(1), long(2), 'refs/heads/x', 'report-status object-format=sha256')), FLUSH, 'PACK'), false);
  assert.deepEqual(summary(v), [`${long(1)} ${long(2)} refs/heads/x`]);
  assert.match(summary(readWhole(cat(pkt(commandLine(A, B, 'refs/heads/x', 'report-status object-format=sha256')), FLUSH, 'PACK'))) as string, /not "<old id> <new id> <ref>" \(sha256\)/);
  assert.match(summary(readWhole(cat(pkt(commandLine(A, B, 'refs/heads/x', 'object-format=sha1')), pkt(commandLine(A, B, 'refs/heads/y', 'object-format=sha256')), FLUSH, 'PACK'))) as string, /different object formats/);
  assert.match(summary(readWhole(cat(pkt(commandLine(A, B, 'refs/heads/x', 'object-format')), FLUSH, 'PACK'))) as string, /object-format= is no format/);
});

test('push commands: bounds: more than MAX_COMMANDS commands, or more than MAX_HEAD_BYTES before the decision, are refused', () => {
  const many = Array.from({ length: MAX_COMMANDS + 1 }, (_, i) => ({ old: ZERO, new: B, ref: `refs/heads/b${i}` }));
  assert.match(summary(readWhole(pushBody(many))) as string, new RegExp(`more than ${MAX_COMMANDS} commands`));
  assert.deepEqual((summary(readWhole(pushBody(many.slice(0, MAX_COMMANDS)), false)) as string[]).length, MAX_COMMANDS);
  const long = Array.from({ length: 80 }, (_, i) => ({ old: ZERO, new: B, ref: `refs/heads/${String(i).padStart(3, '0')}${'x'.repeat(MAX_LINE_BYTES - 200)}` }));
  assert.ok(pushBody(long).length > MAX_HEAD_BYTES);
  assert.match(summary(readWhole(pushBody(long))) as string, new RegExp(`longer than ${MAX_HEAD_BYTES} bytes`));
});

test('push commands: split anywhere: every body gives the same verdict pushed whole, in two pieces at every offset, or a byte at a time', () => {
  const bodies = [
    pushBody([{ old: A, new: B, ref: 'refs/heads/main' }, { old: ZERO, new: B, ref: 'refs/tags/v1' }]),
    cat(...certificateLines([`${A} ${B} refs/heads/main\n`], GIT_CAPS, '-----BEGIN PGP SIGNATURE-----\n'), FLUSH, emptyPack()),
    cat(pkt(`shallow ${oid(3)}\n`), pkt(commandLine(A, B, 'refs/heads/x', `${GIT_CAPS} push-options`)), FLUSH, pkt('opt'), FLUSH, emptyPack()),
    cat(pkt(commandLine(A, B, 'refs/heads/x', GIT_CAPS)), FLUSH, pkt(commandLine(A, B, 'refs/heads/main')), FLUSH),
  ];
  for (const body of bodies) {
    const expected = summary(readWhole(body));
    for (let at = 0; at <= body.length; at++) {
      const reader = new PushHeadReader();
      reader.push(body.subarray(0, at));
      const v = reader.push(body.subarray(at));
      assert.deepEqual(summary(v.kind === 'more' ? reader.end() : v), expected, `split at ${at}`);
    }
    const reader = new PushHeadReader();
    let v: PushHeadVerdict = { kind: 'more' };
    for (let i = 0; i < body.length && v.kind === 'more'; i++) v = reader.push(body.subarray(i, i + 1));
    assert.deepEqual(summary(v.kind === 'more' ? reader.end() : v), expected, 'a byte at a time');
  }
});

test('featureValue reads a capability list as git\'s parse_feature_value: whole words, a value up to a space, TAB or LF', () => {
  const cases: [string, string, string | undefined][] = [
    ['report-status side-band-64k', 'report-status', ''],
    ['report-status-v2', 'report-status', undefined],
    ['xreport-status', 'report-status', undefined],
    ['a\treport-status', 'report-status', ''],
    ['a\rreport-status\r', 'report-status', ''],
    ['object-format=sha256 agent=git/2.39', 'object-format', 'sha256'],
    ['object-format=sha1\tx', 'object-format', 'sha1'],
    ['object-format=sha1\rx', 'object-format', 'sha1\rx'],
    ['object-format=sha1 object-format=sha256', 'object-format', 'sha1'],
    ['agent=object-format=sha256', 'object-format', undefined],
    ['', 'report-status', undefined],
  ];
  for (const [list, name, expected] of cases) assert.equal(featureValue(list, name), expected, JSON.stringify([list, name]));
});
