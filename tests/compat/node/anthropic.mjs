// The anthropic SDK for JavaScript on the Messages API: a multi-turn chat (the second turn streamed) and a tool loop.
import Anthropic from "@anthropic-ai/sdk";
import { calls, compat, done, weather } from "./scenario.mjs";

const client = new Anthropic({ baseURL: compat.baseUrl, apiKey: compat.key, maxRetries: 0 });
const model = compat.model;
const textOf = (message) => message.content.filter((b) => b.type === "text").map((b) => b.text).join("");

if (compat.scenario === "multi_turn") {
  const messages = [{ role: "user", content: compat.first }];
  const first = await client.messages.create({ model, max_tokens: 200, messages });
  messages.push({ role: "assistant", content: first.content }, { role: "user", content: compat.second });
  const second = await client.messages.stream({ model, max_tokens: 200, messages }).finalMessage();
  done({ first: textOf(first), second: textOf(second) });
} else {
  const tools = [{ name: compat.toolName, description: compat.toolDescription, input_schema: compat.toolParameters }];
  const messages = [{ role: "user", content: compat.question }];
  for (;;) {
    const message = await client.messages.create({ model, max_tokens: 200, messages, tools });
    if (message.stop_reason !== "tool_use") {
      done({ calls, answer: textOf(message) });
      break;
    }
    messages.push({ role: "assistant", content: message.content });
    const uses = message.content.filter((block) => block.type === "tool_use");
    messages.push({ role: "user", content: uses.map((use) => (
      { type: "tool_result", tool_use_id: use.id, content: weather(use.input) })) });
  }
}
