// Preloaded into server-everything by the gateway's tests (`node --import`): every socket the
// process listens on is bound to 127.0.0.1, whatever it asked for (server-everything listens
// on all interfaces; a test's server must be reachable from this machine only).
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    // listen(port[, host][, backlog][, callback])
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
    else args[1] = "127.0.0.1";
  } else if (first && typeof first === "object" && first.path === undefined) {
    args[0] = { ...first, host: "127.0.0.1" };
  }
  return listen.apply(this, args);
};
