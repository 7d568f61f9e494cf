// Preloaded into supergateway (`node --require loopback.cjs`), which has no option for the
// address it listens on and listens on every interface: a `listen(port, ...)` without a host
// gets 127.0.0.1, so the bench opens nothing beyond loopback.
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
