// The AI SDK's own chat (`AbstractChat`, what `useChat` wraps, with its UI message stream
// reader) against a live server: a question, the tool part's approval request, the person's
// decision (`addToolApprovalResponse`, sent on by `sendAutomaticallyWhen`), and one more turn.
// Each chunk is also checked against the SDK's chunk schema. Prints a JSON report.
// Usage: node ui_stream_client.mjs BASE_URL approve|deny
import {
  AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses,
  parseJsonEventStream, uiMessageChunkSchema,
} from "ai";

const [base, decision] = process.argv.slice(2);
const api = `${base}/api/chat`;

class State {
  constructor() { this.status = "ready"; this.error = undefined; this.messages = []; }
  pushMessage(message) { this.messages = this.messages.concat(message); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(index, message) { this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)]; }
  snapshot(value) { return structuredClone(value); }
}
const requests = [];
const errors = [];
const checkedFetch = async (url, init) => {
  const response = await fetch(url, init);
  requests.push({ body: JSON.parse(init.body), header: response.headers.get("x-vercel-ai-ui-message-stream") });
  const [mine, theirs] = response.body.tee();
  // Every chunk through the SDK's own schema, as a strict reader would.
  (async () => {
    for await (const parsed of parseJsonEventStream({ stream: mine, schema: uiMessageChunkSchema })) {
      if (!parsed.success) errors.push(`schema: ${String(parsed.error.message).slice(0, 300)}`);
    }
  })();
  return new Response(theirs, { status: response.status, headers: response.headers });
};
const chat = new (class extends AbstractChat {})({
  id: `chat-${Math.random().toString(16).slice(2)}-${Date.now()}`,
  state: new State(),
  transport: new DefaultChatTransport({ api, fetch: checkedFetch }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  onError: (error) => { errors.push(String(error.message || error)); },
});
async function settled() {
  for (let i = 0; i < 600; i++) {
    await new Promise((r) => setTimeout(r, 20));
    if (chat.status === "ready" || chat.status === "error") return chat.status;
  }
  return chat.status;
}
const parts = (m) => m.parts.filter((p) => p.type !== "step-start").map((p) => ({ type: p.type, state: p.state ?? null, input: p.input ?? null, output: p.output ?? null, errorText: p.errorText ?? null, approval: p.approval ?? null, text: p.text ?? null, mediaType: p.mediaType ?? null }));

try {
  await chat.sendMessage({ text: "delete /tmp/x" });
  const first = await settled();
  const asked = structuredClone(chat.messages.at(-1));
  const request = asked.parts.find((p) => p.state === "approval-requested");
  if (!request) throw new Error(`no approval request: ${JSON.stringify(asked)}`);
  await chat.addToolApprovalResponse({ id: request.approval.id, approved: decision !== "deny", reason: decision === "deny" ? "not today" : undefined });
  const second = await settled();
  const decided = structuredClone(chat.messages.at(-1));
  await chat.sendMessage({ text: "photo" });
  const third = await settled();
  process.stdout.write(JSON.stringify({
    statuses: [first, second, third],
    messages: chat.messages.map((m) => ({ id: m.id, role: m.role, parts: parts(m), sealed: Boolean(m.metadata && m.metadata.agentforge) })),
    askedId: asked.id, decidedId: decided.id,
    requests: requests.map((r) => ({ messageId: r.body.messageId ?? null, trigger: r.body.trigger, count: r.body.messages.length, header: r.header })),
    errors,
  }));
} catch (error) {
  console.error(String(error && error.stack || error));
  console.error(JSON.stringify({ errors, requests }));
  process.exit(1);
}
