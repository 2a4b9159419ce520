// The OpenAI Agents SDK for JavaScript, on the Responses API (its default) or chat completions: a multi-turn run
// (the second given the first run's history) and an agent that calls a function tool.
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool, user } from "@openai/agents";
import OpenAI from "openai";
import { calls, compat, done, weather } from "./scenario.mjs";

setDefaultOpenAIClient(new OpenAI({ baseURL: compat.openaiUrl, apiKey: compat.key, maxRetries: 0 }));
setOpenAIAPI(compat.mode === "chat" ? "chat_completions" : "responses");
setTracingDisabled(true); // it would otherwise export every run's trace to OpenAI's own platform

if (compat.scenario === "multi_turn") {
  const agent = new Agent({ name: "assistant", model: compat.model });
  const first = await run(agent, compat.first);
  const second = await run(agent, [...first.history, user(compat.second)]);
  done({ first: first.finalOutput, second: second.finalOutput });
} else {
  const getWeather = tool({
    name: compat.toolName,
    description: compat.toolDescription,
    parameters: compat.toolParameters,
    strict: true,
    execute: async (args) => weather(args),
  });
  const agent = new Agent({ name: "assistant", model: compat.model, tools: [getWeather] });
  const result = await run(agent, compat.question);
  done({ calls, answer: result.finalOutput });
}
