// runbox: Node's fetch (undici) ignores HTTP_PROXY/HTTPS_PROXY before
// Node 24. Loaded with --import, this replaces fetch's global dispatcher
// with an Agent of fetch's own undici (whatever version this Node
// bundles) whose connector opens every connection as a CONNECT tunnel
// through runbox's proxy, with TLS on top for https. Only node's own
// modules are used.
//
// A session's driver ends the tunnels where a cell ends (the function at
// Symbol.for('runbox.proxy.endTunnels')), as the process's exit would:
// runbox-init's proxy closes them once the call is over, and the next
// cell's fetch must not take up an idle one whose close its event loop
// has not seen yet (its request would die with EPIPE).
import net from 'node:net';
import tls from 'node:tls';

const proxy = process.env.HTTPS_PROXY || process.env.https_proxy || process.env.HTTP_PROXY || process.env.http_proxy;
const key = Symbol.for('undici.globalDispatcher.1');
if (proxy && typeof globalThis.fetch === 'function') {
  // The first call loads fetch's undici, which installs its default Agent.
  if (!globalThis[key]) {
    try { globalThis.fetch('data:,').catch(() => {}); } catch {}
  }
  const Agent = globalThis[key] && globalThis[key].constructor;
  if (typeof Agent === 'function') {
    const p = new URL(proxy);
    const tunnels = new Set();
    const track = (s) => {
      tunnels.add(s);
      s.once('close', () => tunnels.delete(s));
    };
    const connect = (opts, callback) => {
      let done = false;
      const finish = (err, sock) => { if (!done) { done = true; callback(err, sock); } };
      const https = opts.protocol === 'https:';
      const port = Number(opts.port) || (https ? 443 : 80);
      let host = opts.hostname;
      const target = host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
      host = host.replace(/^\[|\]$/g, '');
      const sock = net.connect({ host: p.hostname, port: Number(p.port) || 80 });
      track(sock);
      sock.setNoDelay(true);
      sock.once('error', (err) => finish(err));
      // Ended before it was handed on (endTunnels, or the proxy closed
      // it): the request fails rather than waits for good.
      sock.once('close', () => finish(new Error(`runbox proxy: the tunnel to ${target} closed`)));
      sock.once('connect', () => sock.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
      let head = Buffer.alloc(0);
      const onData = (chunk) => {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > 65536) { sock.destroy(); finish(new Error('runbox proxy: an oversized answer to CONNECT')); }
          return;
        }
        sock.removeListener('data', onData);
        const status = head.subarray(0, head.indexOf('\r\n')).toString();
        if (!/^HTTP\/1\.[01] 200/.test(status)) {
          sock.destroy();
          finish(new Error(`runbox proxy refused ${target}: ${status}`));
          return;
        }
        const rest = head.subarray(end + 4);
        if (rest.length) sock.unshift(rest);
        if (!https) { finish(null, sock); return; }
        // host makes the certificate check use the target, an address
        // included; SNI only carries names.
        const servername = net.isIP(host) ? undefined : (opts.servername || host);
        const t = tls.connect({ socket: sock, host, servername, ALPNProtocols: ['http/1.1'] });
        track(t);
        t.once('error', (err) => finish(err));
        t.once('secureConnect', () => finish(null, t));
      };
      sock.on('data', onData);
    };
    globalThis[key] = new Agent({ connect });
    globalThis[Symbol.for('runbox.proxy.endTunnels')] = () => {
      for (const s of tunnels) s.destroy();
      tunnels.clear();
    };
  }
}
