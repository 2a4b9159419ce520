// Loaded before Portkey's start-server.js (`node --require`): it calls @hono/node-server's serve() with a port
// and no hostname, so Node would listen on every interface. The benchmark keeps every server on loopback, so a
// listen() call that names no host gets 127.0.0.1.
"use strict";
const net = require("node:net");

const LOOPBACK = "127.0.0.1";
const listen = net.Server.prototype.listen;

net.Server.prototype.listen = function listenOnLoopback(...args) {
  const [first, second] = args;
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    if (second === undefined || second === null) {
      args[1] = LOOPBACK;  // listen(port, undefined, callback) and listen(port)
    } else if (typeof second === "function") {
      args.splice(1, 0, LOOPBACK);  // listen(port, callback)
    }
  } else if (first !== null && typeof first === "object" && first.path === undefined && !first.host) {
    args[0] = { ...first, host: LOOPBACK };  // listen({port})
  }
  return listen.apply(this, args);
};
