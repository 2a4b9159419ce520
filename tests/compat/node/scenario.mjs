// What every Node scenario reads and prints: the test (tests/compat/node_clients.py) passes the gateway, the key,
// the model, the scenario and its texts in COMPAT as JSON, and reads one JSON line of the outcome from stdout.

export const compat = JSON.parse(process.env.COMPAT);

// The tool every tool loop declares; it records each call's arguments.
export const calls = [];
export function weather(args) {
  calls.push(args);
  return compat.toolResult;
}

export function done(outcome) {
  process.stdout.write(JSON.stringify(outcome) + "\n");
}
