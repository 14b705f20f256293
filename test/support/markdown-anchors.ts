// The anchors a Markdown file offers, as GitHub renders it: one per heading outside code fences
// (lower case, punctuation but hyphens dropped, spaces as hyphens), and each explicit
// `<a id="...">` outside code. Read by the tests that check links into the docs.

export function markdownAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fence = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fence = !fence;
    if (fence) continue;
    const m = /^#{1,6} (.*)$/.exec(line);
    if (m) anchors.add(m[1]!.trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-'));
    for (const a of line.matchAll(/<a id="([\w-]+)"><\/a>/g)) anchors.add(a[1]!);
  }
  return anchors;
}
