'use strict';
// Call the MCP tools runbox connects to, from code in the box.
//
//   const tools = require('runbox_tools');
//   await tools.memory.create_entities({entities: [...]});  // tools.<server>.<tool>(args)
//   await tools.call('memory', 'read_graph', {});            // any name, as the server spells it
//
// A call resolves to the tool's structured content, or its text (an array
// when it has several parts; images and other binary parts as Buffers). A
// failure rejects with a ToolError carrying kind, server, tool and message.
// Names that are not identifiers read with - and . as _ (get-sum is
// tools.everything.get_sum). Calls go to runbox-init over a socket inside
// the box and on over runbox's own channel to the host: the box has no
// network.
const net = require('net');

const SOCKET = '/tmp/.runbox/tools.sock';

class ToolError extends Error {
  constructor(kind, server, tool, message) {
    super(`${server}.${tool}: ${message} (${kind})`);
    this.name = 'ToolError';
    this.kind = kind;
    this.server = server;
    this.tool = tool;
    this.toolMessage = message;
  }
}

function request(req) {
  return new Promise((resolve, reject) => {
    let body;
    try {
      body = JSON.stringify(req);
    } catch (e) {
      reject(new ToolError('bad_request', req.server || '', req.tool || '', 'the arguments cannot be sent as JSON: ' + e.message));
      return;
    }
    const chunks = [];
    let connected = false;
    let broke = null;
    const s = net.createConnection(SOCKET);
    s.on('connect', () => { connected = true; s.end(body); });
    s.on('data', (c) => chunks.push(c));
    // runbox-init reads a request to its end even when it refuses it, so
    // the answer follows; a connection that broke anyway still gives
    // what came.
    s.on('error', (e) => {
      if (!connected) {
        reject(new ToolError('unavailable', req.server || '', req.tool || '', 'no tool servers are available to this run'));
        return;
      }
      broke = e;
    });
    s.on('close', () => {
      if (!connected) return;
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (e) {
        const why = broke ? 'the call\'s connection to runbox-init broke (' + (broke.code || broke.message) + ')' : 'the call ended without an answer';
        reject(new ToolError('upstream', req.server || '', req.tool || '', why));
      }
    });
  });
}

function result(a) {
  if (a.structured !== undefined && a.structured !== null) return a.structured;
  const parts = [];
  for (const c of a.content || []) {
    if (c.type === 'text') parts.push(c.text || '');
    else if (c.type === 'image' || c.type === 'audio' || c.type === 'blob') parts.push(Buffer.from(c.data || '', 'base64'));
    else if (c.type === 'link') parts.push(c.uri || '');
  }
  if (parts.length === 0) return null;
  return parts.length === 1 ? parts[0] : parts;
}

async function call(server, name, args) {
  const a = await request({ op: 'call', server, tool: name, args: args || {} });
  if (!a.ok) {
    const e = a.error || {};
    throw new ToolError(e.kind || 'upstream', e.server || server, e.tool || name, e.message || 'failed');
  }
  return result(a);
}

// list resolves to the servers with their tools, schemas included.
async function list() {
  const a = await request({ op: 'list' });
  return a.ok ? a.servers || [] : [];
}

const base = { call, list, ToolError };
const servers = {};

function server(name) {
  if (!servers[name]) {
    servers[name] = new Proxy({}, {
      get(_, tool) {
        if (typeof tool !== 'string' || tool === 'then' || tool === 'toJSON') return undefined;
        return (args) => call(name, tool, args);
      },
    });
  }
  return servers[name];
}

module.exports = new Proxy(base, {
  get(target, prop) {
    if (prop in target) return target[prop];
    if (typeof prop !== 'string' || prop === 'then' || prop === '__esModule' || prop === 'default') return prop === 'default' ? module.exports : undefined;
    return server(prop);
  },
});
