// runbox_tools for ES modules: import tools from 'runbox_tools' (see
// runbox_tools.js). register.mjs resolves the bare name to this file.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const tools = require('./runbox_tools.js');

export default tools;
export const call = tools.call;
export const list = tools.list;
export const typings = tools.typings;
export const ToolError = tools.ToolError;
