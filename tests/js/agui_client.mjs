// The official AG-UI client (@ag-ui/client's HttpAgent) against a live server: a question, the
// interrupt of the call that needs approval, the resume with the person's decision, and one more
// turn on the history the client kept. Prints a JSON report; exits 1 on any protocol error.
// Usage: node agui_client.mjs BASE_URL approve|deny
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [base, decision] = process.argv.slice(2);
const warnings = [];
const warn = console.warn;
console.warn = (...args) => { warnings.push(args.map(String).join(" ")); };
console.log = (...args) => { warnings.push(args.map(String).join(" ")); };  // the client's debug lines

const threadId = `thread-${Math.random().toString(16).slice(2)}-${Date.now()}`;
const agent = new HttpAgent({
  url: `${base}/ag-ui`,
  threadId,
  initialMessages: [{ id: "u1", role: "user", content: "delete /tmp/x" }],
});
const runs = [];
async function run(params) {
  const seen = { events: [], outcome: null, errors: [] };
  const result = await agent.runAgent(params, {
    onEvent: ({ event }) => { seen.events.push(event.type); },
    onRunFinishedEvent: (p) => { seen.outcome = p.outcome; },
    onRunErrorEvent: ({ event }) => { seen.errors.push(event.message); },
  });
  seen.newMessages = result.newMessages.map((m) => ({ role: m.role, content: m.content ?? null, toolCalls: m.toolCalls ?? null }));
  runs.push(seen);
  return seen;
}

try {
  const first = await run({ runId: "run-1" });
  const interrupts = structuredClone(agent.pendingInterrupts);
  const payload = decision === "deny" ? { approved: false, reason: "not today" } : { approved: true };
  const resume = buildResumeArray(agent.pendingInterrupts,
    Object.fromEntries(agent.pendingInterrupts.map((i) => [i.id, { status: "resolved", payload }])));
  await run({ runId: "run-2", resume });
  const pendingAfter = agent.pendingInterrupts.length;
  agent.addMessage({ id: "u2", role: "user", content: "lookup abc" });
  await run({ runId: "run-3" });
  process.stdout.write(JSON.stringify({
    runs, interrupts, pendingAfter, first: first.outcome,
    messages: agent.messages.map((m) => ({ role: m.role, content: m.content ?? null, toolCalls: m.toolCalls ?? null, sealed: Boolean(m.encryptedValue) })),
    warnings,
  }));
} catch (error) {
  console.error(String(error && error.stack || error));
  console.error(JSON.stringify({ runs, warnings }));
  process.exit(1);
}
