// Loaded with node --import when the code imports runbox_tools as an ES
// module: ES module resolution ignores NODE_PATH, so this hook resolves the
// bare name to the library runbox-init wrote next to it.
import { register } from 'node:module';

const target = new URL('./runbox_tools.mjs', import.meta.url).href;
register('data:text/javascript,' + encodeURIComponent(
  `export async function resolve(s, c, next) { return s === 'runbox_tools' ? { url: ${JSON.stringify(target)}, shortCircuit: true } : next(s, c); }`));
