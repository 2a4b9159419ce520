/*
 * The admin's playground (templates/admin/playground.html, routing/playground.py).
 *
 * Builds an OpenAI chat body from the form, asks the staff session for a short-lived token (a POST with the CSRF
 * token), sends the body to the gateway's own /v1/chat/completions with stream: true and that token (no cookie),
 * writes the streamed answer into the page as text, then shows the decision: first from the response headers,
 * then from the audit revision once the audit has stored it. Everything the model or the gateway says is written
 * with textContent, never as HTML.
 */
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("pg-config").textContent);
  const form = document.getElementById("pg-form");
  const messages = document.getElementById("pg-messages");
  const template = document.getElementById("pg-message-template");
  const answer = document.getElementById("pg-answer");
  const errorBox = document.getElementById("pg-error");
  const toolCallsBox = document.getElementById("pg-tool-calls");
  const statusBox = document.getElementById("pg-status");
  const decisionBody = document.querySelector("#pg-decision tbody");
  const attemptsTable = document.getElementById("pg-attempts");
  const revisionLink = document.getElementById("pg-revision-link");
  const sendButton = document.getElementById("pg-send");

  /* A problem with one field of the form: its message starts with the field's name, as the gateway's do. */
  class FieldError extends Error {
    constructor(field, element, message) {
      super(field + ": " + message);
      this.element = element;
    }
  }

  function addMessage(role, content) {
    const node = template.content.firstElementChild.cloneNode(true);
    node.querySelector(".pg-role").value = role;
    node.querySelector(".pg-content").value = content;
    node.querySelector(".pg-remove").addEventListener("click", function () {
      node.remove();
      renumber();
    });
    messages.appendChild(node);
    renumber();
    return node;
  }

  function renumber() {
    messages.querySelectorAll(".pg-message").forEach(function (node, index) {
      node.dataset.index = String(index);
      node.querySelector(".pg-content").id = "pg-message-" + index;
    });
  }

  function toolProblem(tool, index) {
    const where = "tools[" + index + "]";
    if (tool === null || typeof tool !== "object" || Array.isArray(tool)) {
      return [where, "expected an object such as {\"type\": \"function\", \"function\": {...}}"];
    }
    if (tool.type !== "function") {
      return [where + ".type", "expected \"function\", got " + JSON.stringify(tool.type)];
    }
    const fn = tool.function;
    if (fn === null || typeof fn !== "object" || Array.isArray(fn)) {
      return [where + ".function", "expected an object with a name and parameters"];
    }
    if (typeof fn.name !== "string" || fn.name === "") {
      return [where + ".function.name", "expected the function's name as a string"];
    }
    if (fn.parameters !== undefined && (fn.parameters === null || typeof fn.parameters !== "object")) {
      return [where + ".function.parameters", "expected a JSON Schema object"];
    }
    return null;
  }

  /* The request body and headers the form describes; throws FieldError naming the field that is wrong. */
  function buildRequest() {
    const model = document.getElementById("pg-model");
    if (!model.value) {
      throw new FieldError("model", model, "choose a name to send the chat to");
    }
    const chat = [];
    const system = document.getElementById("pg-system").value;
    if (system.trim()) {
      chat.push({role: "system", content: system});
    }
    const rows = messages.querySelectorAll(".pg-message");
    rows.forEach(function (node, index) {
      const content = node.querySelector(".pg-content");
      if (!content.value.trim()) {
        throw new FieldError("messages[" + index + "].content", content, "write the message or remove it");
      }
      chat.push({role: node.querySelector(".pg-role").value, content: content.value});
    });
    if (!chat.some(function (m) { return m.role === "user"; })) {
      throw new FieldError("messages", document.getElementById("pg-add-message"), "add at least one user message");
    }
    const body = {model: model.value, messages: chat, stream: true, stream_options: {include_usage: true}};
    const toolsField = document.getElementById("pg-tools");
    if (toolsField.value.trim()) {
      let tools;
      try {
        tools = JSON.parse(toolsField.value);
      } catch (error) {
        throw new FieldError("tools", toolsField, "not valid JSON (" + error.message + ")");
      }
      if (!Array.isArray(tools)) {
        throw new FieldError("tools", toolsField, "expected a JSON array of tools, got " +
          (tools === null ? "null" : typeof tools));
      }
      for (let i = 0; i < tools.length; i++) {
        const problem = toolProblem(tools[i], i);
        if (problem) {
          throw new FieldError(problem[0], toolsField, problem[1]);
        }
      }
      if (tools.length) {
        body.tools = tools;
      }
    }
    const maxTokens = document.getElementById("pg-max-tokens");
    if (maxTokens.value.trim()) {
      const value = Number(maxTokens.value);
      if (!Number.isInteger(value) || value < 1) {
        throw new FieldError("max_tokens", maxTokens, "expected a whole number of at least 1");
      }
      body.max_tokens = value;
    }
    const headers = {"Content-Type": "application/json"};
    const tier = document.getElementById("pg-tier").value;
    if (tier) {
      headers["X-GoModel-Tier"] = tier;
    }
    const policy = document.getElementById("pg-policy").value;
    if (policy) {
      headers["X-Routing-Policy"] = policy;
    }
    return {body: body, headers: headers};
  }

  function setStatus(text) {
    statusBox.textContent = text;
  }

  function showError(text) {
    errorBox.textContent = text;
  }

  function clearOutput() {
    answer.textContent = "";
    errorBox.textContent = "";
    toolCallsBox.textContent = "";
    decisionBody.textContent = "";
    attemptsTable.hidden = true;
    attemptsTable.querySelector("tbody").textContent = "";
    revisionLink.hidden = true;
    form.querySelectorAll("[aria-invalid]").forEach(function (node) { node.removeAttribute("aria-invalid"); });
  }

  function addRow(field, label, value) {
    let row = decisionBody.querySelector("tr[data-field='" + field + "']");
    if (!row) {
      row = document.createElement("tr");
      row.dataset.field = field;
      row.appendChild(document.createElement("th"));
      row.appendChild(document.createElement("td"));
      decisionBody.appendChild(row);
    }
    row.children[0].textContent = label;
    row.children[1].textContent = value;
  }

  /* What the response headers say at once: X-Request-Id and the X-GoModel-* decision headers. */
  function showHeaders(headers, caller) {
    const get = function (name) { return headers.get(name) || ""; };
    addRow("request_id", "Request id", get("x-request-id") || "-");
    addRow("caller", "Sent as", caller);
    if (get("x-gomodel-pro-tier")) {
      addRow("tier", "Tier", get("x-gomodel-pro-tier") + " (score " + get("x-gomodel-pro-tier-score") + ", to " +
        get("x-gomodel-pro-tier-target") + ")" +
        (get("x-gomodel-pro-tier-escalated") ? ", escalated: " + get("x-gomodel-pro-tier-escalated") : ""));
    }
    if (get("x-gomodel-category")) {
      addRow("category", "Category", get("x-gomodel-category") + " (to " + get("x-gomodel-category-target") + ")");
    }
    if (get("x-gomodel-policy")) {
      addRow("policy", "Routing policy", get("x-gomodel-policy"));
    }
    if (get("x-gomodel-target")) {
      addRow("target", "Answered by", get("x-gomodel-target"));
    }
    if (get("x-gomodel-attempts")) {
      addRow("attempt_count", "Attempts", get("x-gomodel-attempts"));
    }
    if (get("x-gomodel-cost-usd")) {
      addRow("cost", "Cost", "$" + get("x-gomodel-cost-usd"));
    }
    if (get("x-ratelimit-remaining-requests")) {
      addRow("limits", "Key's requests left", get("x-ratelimit-remaining-requests") + " of " +
        get("x-ratelimit-limit-requests"));
    }
  }

  /* The decision the audit stored (audit/playground.py), over what the headers said. */
  function showDecision(d) {
    addRow("status", "Status", String(d.status === null ? "-" : d.status) + (d.error_class ? " (" + d.error_class + ")" : ""));
    addRow("caller", "Sent as", (d.key || "no key") + (d.team ? ", team " + d.team : ""));
    addRow("model", "Model asked", d.requested_model);
    if (d.tier) {
      addRow("tier", "Tier", d.tier.tier + " (score " + d.tier.score + ", " + d.tier.alias + " to " + d.tier.target + ")" +
        (d.tier.forced ? ", forced" : "") + (d.tier.pinned ? ", pinned by the session" : "") +
        (d.tier.escalated ? ", escalated" : ""));
    }
    if (d.category) {
      addRow("category", "Category", d.category.category + " (" + (d.category.why || d.category.rule) + "; to " +
        d.category.target + ")");
    }
    if (d.policy) {
      addRow("policy", "Routing policy", d.policy.chain || d.policy.name);
    }
    if (d.virtual_model) {
      addRow("virtual_model", "Virtual model", d.virtual_model + " (" + d.strategy + ")" +
        (d.selection_why ? ": " + d.selection_why : ""));
    }
    addRow("target", "Answered by", d.target || "nobody");
    if (d.limit) {
      addRow("limit", "Refused by a limit", d.limit.code + " (" + d.limit.words + (d.limit.who ? " of " + d.limit.who : "") + ")");
    }
    if (d.error_message) {
      addRow("error", "Error", d.error_message);
    }
    addRow("attempt_count", "Attempts", String(d.attempts.length) + (d.fell_back ? ", fell back" : ""));
    addRow("latency", "Latency", d.latency_ms + " ms" + (d.ttfb_ms !== null ? " (first byte " + d.ttfb_ms + " ms)" : ""));
    addRow("tokens", "Tokens", d.input_tokens + " in, " + d.output_tokens + " out" + (d.usage_estimated ? " (estimated)" : ""));
    addRow("cost", "Cost", d.cost + (d.billed && d.billed !== d.cost ? " (billed " + d.billed + ")" : ""));
    const body = attemptsTable.querySelector("tbody");
    body.textContent = "";
    d.attempts.forEach(function (a) {
      const row = document.createElement("tr");
      [String(a.seq), a.target, a.status === null ? (a.error_class || "-") : String(a.status), a.outcome +
        (a.reason && a.outcome !== "answered" ? ": " + a.reason : ""), a.latency_ms + " ms", a.cost].forEach(function (text, i) {
        const cell = document.createElement("td");
        cell.textContent = text;
        if (i >= 4) {
          cell.className = "num";
        }
        row.appendChild(cell);
      });
      body.appendChild(row);
    });
    attemptsTable.hidden = d.attempts.length === 0;
    revisionLink.querySelector("a").href = d.revision_url;
    revisionLink.hidden = false;
  }

  function sleep(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }

  /* Polls the stored decision: the audit writes it after the answer, off the request path. */
  async function fetchDecision(requestId) {
    const url = config.decisionUrl.replace("REQUEST_ID", encodeURIComponent(requestId));
    for (let round = 0; round < 40; round++) {
      const response = await fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}});
      if (!response.ok) {
        setStatus("the decision could not be read (" + response.status + ")");
        return;
      }
      const data = await response.json();
      if (data.stored) {
        showDecision(data.decision);
        return true;
      }
      await sleep(Math.min(250 * (round + 1), 1000));
    }
    setStatus("the audit has not stored this request yet; open the request history later");
    return false;
  }

  /* Reads the server-sent events of a streamed chat completion, writing the answer as it arrives. */
  async function readStream(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const calls = [];
    let buffer = "";
    let finish = "";
    const handle = function (event) {
      const data = event.split(/\r?\n/).filter(function (line) { return line.startsWith("data:"); })
        .map(function (line) { return line.slice(5).replace(/^ /, ""); }).join("\n");
      if (!data || data === "[DONE]") {
        return;
      }
      let chunk;
      try {
        chunk = JSON.parse(data);
      } catch (error) {
        showError("The stream sent an event that is not JSON: " + data.slice(0, 200));
        return;
      }
      if (chunk.error) {
        showError("The stream ended with an error: " + (chunk.error.message || JSON.stringify(chunk.error)));
        return;
      }
      (chunk.choices || []).forEach(function (choice) {
        const delta = choice.delta || {};
        if (typeof delta.content === "string") {
          answer.textContent += delta.content;
        }
        (delta.tool_calls || []).forEach(function (call) {
          const index = call.index || 0;
          calls[index] = calls[index] || {id: "", name: "", arguments: ""};
          if (call.id) { calls[index].id = call.id; }
          if (call.function && call.function.name) { calls[index].name += call.function.name; }
          if (call.function && call.function.arguments) { calls[index].arguments += call.function.arguments; }
        });
        if (choice.finish_reason) {
          finish = choice.finish_reason;
        }
      });
    };
    for (;;) {
      const part = await reader.read();
      if (part.done) {
        break;
      }
      buffer += decoder.decode(part.value, {stream: true});
      let match;
      while ((match = /\r?\n\r?\n/.exec(buffer)) !== null) {
        handle(buffer.slice(0, match.index));
        buffer = buffer.slice(match.index + match[0].length);
      }
    }
    if (buffer.trim()) {
      handle(buffer);
    }
    calls.filter(Boolean).forEach(function (call) {
      const pre = document.createElement("pre");
      pre.className = "mono pg-tool-call";
      pre.textContent = "tool call " + call.name + " (" + call.id + "): " + call.arguments;
      toolCallsBox.appendChild(pre);
    });
    return finish;
  }

  async function send(event) {
    event.preventDefault();
    clearOutput();
    let request;
    try {
      request = buildRequest();
    } catch (error) {
      if (!(error instanceof FieldError)) {
        throw error;
      }
      showError(error.message);
      error.element.setAttribute("aria-invalid", "true");
      error.element.focus();
      return;
    }
    sendButton.disabled = true;
    const started = performance.now();
    try {
      setStatus("getting a token...");
      const caller = document.getElementById("pg-caller");
      const tokenResponse = await fetch(config.tokenUrl, {
        method: "POST", credentials: "same-origin",
        headers: {"X-CSRFToken": form.querySelector("input[name=csrfmiddlewaretoken]").value,
                  "Content-Type": "application/x-www-form-urlencoded"},
        body: new URLSearchParams({as: caller.value}),
      });
      const tokenData = await tokenResponse.json().catch(function () { return {}; });
      if (!tokenResponse.ok || !tokenData.token) {
        // A session that ended answers with the login page (a redirect), not a token.
        showError("No token (" + tokenResponse.status + "): " + ((tokenData.error && tokenData.error.message) ||
          "your session may have ended or lacks the permission to send; reload the page and log in again"));
        setStatus("");
        return;
      }
      setStatus("sending...");
      request.headers.Authorization = "Bearer " + tokenData.token;
      const response = await fetch(config.chatUrl, {
        method: "POST", credentials: "omit", headers: request.headers, body: JSON.stringify(request.body),
      });
      showHeaders(response.headers, tokenData.caller);
      const requestId = response.headers.get("x-request-id") || "";
      if (!response.ok) {
        const failure = await response.json().catch(function () { return {}; });
        const error = failure.error || {};
        showError(response.status + (error.code ? " " + error.code : "") + ": " + (error.message || "no message") +
          (error.param ? " (" + error.param + ")" : ""));
        setStatus("refused");
      } else {
        setStatus("streaming...");
        const finish = await readStream(response);
        setStatus("done in " + Math.round(performance.now() - started) + " ms" + (finish ? " (" + finish + ")" : ""));
      }
      if (requestId && config.canViewAudit) {
        const status = statusBox.textContent;
        setStatus(status + "; reading the decision from the audit...");
        if (await fetchDecision(requestId)) {
          setStatus(status);
        }
      }
    } catch (error) {
      showError("The request failed: " + error.message);
      setStatus("");
    } finally {
      sendButton.disabled = false;
    }
  }

  document.getElementById("pg-add-message").addEventListener("click", function () {
    addMessage("user", "").querySelector(".pg-content").focus();
  });
  form.addEventListener("submit", send);
  addMessage("user", "");
  form.dataset.ready = "true";
}());
