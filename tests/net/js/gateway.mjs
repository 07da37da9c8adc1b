// Starting loom-gateway for the Node.js client tests: on a free loopback port, its output kept for failure
// messages; `ready` resolves with the port once it logs that it serves, `exited` when it ends. stopGateway
// ends it with SIGTERM, as a service manager would, and says what went wrong if it did not exit 0.
import { spawn } from "node:child_process";

const READY = /loom-gateway: ready to serve on http:\/\/([^\s:]+):(\d+)/;

export function startGateway(gatewayPath, args) {
  const child = spawn(gatewayPath, [...args, "--host", "127.0.0.1", "--port", "0"], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => resolve({ code, signal }));
    child.on("error", () => resolve({ code: null, signal: null }));  // it never started
  });
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the gateway was not ready within 60 s; its output:\n${log}`)), 60000);
    const scan = (data) => {
      log += data.toString();
      const match = READY.exec(log);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[2]));
      }
    };
    child.stdout.on("data", scan);
    child.stderr.on("data", scan);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot start ${gatewayPath}: ${error.message}`));
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`the gateway exited (code ${code}, signal ${signal}) before it was ready; its output:\n${log}`));
    });
  });
  return { child, ready, exited, output: () => log };
}

// SIGTERM (unless it has already ended), SIGKILL after 30 s; null when it exited 0, else what happened, with
// its output.
export async function stopGateway(gateway) {
  const timer = setTimeout(() => {
    console.error("the gateway did not exit within 30 s of SIGTERM; killing it");
    gateway.child.kill("SIGKILL");
  }, 30000);
  if (gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill("SIGTERM");
  const { code, signal } = await gateway.exited;
  clearTimeout(timer);
  if (code === 0) return null;
  return `the gateway exited with code ${code} (signal ${signal}) after SIGTERM; its output:\n${gateway.output()}`;
}
