// Preloaded (`node --require`) into a server the tests start that would listen on every
// interface: every `listen(port, ...)` that names no host listens on 127.0.0.1 only.
"use strict";
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  const named = typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port));
  if (named && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
