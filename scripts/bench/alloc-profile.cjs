// Preloaded by `npm run profile` with PROFILE_HEAP=1 (node --require): samples every allocation,
// including objects the garbage collector has since freed (what --heap-prof leaves out), and
// writes the sampling heap profile to $ALLOC_PROFILE_FILE when the process exits. In-process
// inspector sessions answer synchronously, so the profile is taken in the 'exit' handler.
const { Session } = require('node:inspector');
const { writeFileSync } = require('node:fs');

const session = new Session();
session.connect();
session.post('HeapProfiler.enable');
session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
process.on('exit', () => {
  session.post('HeapProfiler.stopSampling', (err, result) => {
    if (!err) writeFileSync(process.env.ALLOC_PROFILE_FILE, JSON.stringify(result.profile));
  });
});
