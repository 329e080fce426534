import { after, before, describe } from 'node:test';
import { docker } from './helpers.js';
import { gradingAttacks } from './support/attack-suite.js';

// The attack suite against the Docker backend, on both of its command paths.
for (const via of ['helper shell', 'engine exec'] as const) {
  describe(`docker backend, commands via ${via}`, () => {
    before(() => {
      if (via === 'engine exec') process.env.TERMGRADE_EXEC_VIA = 'engine';
    });
    after(() => {
      delete process.env.TERMGRADE_EXEC_VIA;
    });
    gradingAttacks(`docker, ${via}`, docker);
  });
}
