// Loaded with `node --require <this file>` in front of third-party servers
// (server-everything calls `app.listen(PORT)` with no host, which binds every
// interface). Tests must only ever be reachable on loopback, so a listen call
// that names a port but no host is given host 127.0.0.1.
//
// Port 0 (and a missing port) is deliberately left alone: callers such as the
// conformance suite's mock servers call `listen(0)` and read `address()`
// synchronously right after. Adding a host makes Node resolve it before
// binding, which turns the bind asynchronous and makes `address()` null.
//
// Pipes, handles and calls that already name a host are passed through as-is.
"use strict";

const net = require("node:net");

const LOOPBACK = "127.0.0.1";
const originalListen = net.Server.prototype.listen;

// A TCP port as Node accepts it: a number, or a string of digits (Node treats
// any other string as a pipe path).
function tcpPort(value) {
  if (typeof value === "number") {
    return value;
  }
  if (typeof value === "string" && /^[0-9]+$/.test(value)) {
    return Number(value);
  }
  return undefined;
}

function wantsLoopback(port) {
  return port !== undefined && port !== 0;
}

net.Server.prototype.listen = function listenOnLoopback(...args) {
  const first = args[0];
  if (first !== null && typeof first === "object" && !Array.isArray(first)) {
    // listen(options[, cb]); `options` may also be a handle ({ fd } or a
    // server), which has neither port nor host and is left alone.
    const port = tcpPort(first.port);
    if (wantsLoopback(port) && first.host === undefined && first.path === undefined) {
      args[0] = { ...first, host: LOOPBACK };
    }
  } else {
    // listen(port[, host][, backlog][, cb]): a host is always a string in
    // second position, so anything else there means "no host given".
    const port = tcpPort(first);
    if (wantsLoopback(port) && typeof args[1] !== "string") {
      args.splice(1, 0, LOOPBACK);
    }
  }
  return originalListen.apply(this, args);
};

// Opt-in, for test harnesses: with SWITCHYARD_EXIT_ON_STDIN_EOF=1 the process
// exits once its stdin reaches end-of-file. A harness that holds the write end
// of the pipe thereby takes the server down with it even when the harness dies
// without running its cleanup (a crash or a kill -9), so no server is left
// listening. Not for servers that read stdin themselves (stdio mode).
if (process.env.SWITCHYARD_EXIT_ON_STDIN_EOF === "1") {
  process.stdin.on("end", () => process.exit(0));
  process.stdin.on("error", () => process.exit(0));
  process.stdin.resume();
}
