// Groundwork web UI: a thin client of the /v1 API (no build step, no dependencies).
const state = { kb: null, conversationId: null, poll: null };
const $ = (id) => document.getElementById(id);

async function api(path, options = {}) {
  const response = await fetch(path, options);
  if (response.status === 204) return null;
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error ? body.error.message : `HTTP ${response.status}`);
  return body;
}

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  for (const child of children) node.append(child);
  return node;
}

async function loadKbs() {
  const { data } = await api("/v1/kbs");
  const list = $("kb-list");
  list.replaceChildren(...data.map((kb) => {
    const item = el("li", { className: kb.name === state.kb ? "active" : "" },
      el("span", { textContent: kb.name }), el("span", { className: "status", textContent: `${kb.documents} docs` }));
    item.onclick = () => selectKb(kb.name);
    return item;
  }));
  if (!state.kb && data.length) selectKb(data[0].name);
}

async function selectKb(name) {
  state.kb = name;
  state.conversationId = null;
  $("kb-detail").hidden = false;
  $("kb-title").textContent = name;
  $("chat-hint").textContent = `Answers come only from “${name}”, with citations.`;
  await loadKbs();
  await loadDocs();
}

async function loadDocs() {
  if (!state.kb) return;
  const { data } = await api(`/v1/kbs/${encodeURIComponent(state.kb)}/documents`);
  $("doc-list").replaceChildren(...data.map((d) =>
    el("li", {}, el("span", { textContent: d.filename, title: d.title || d.filename }),
      el("span", { className: `status ${d.status}`, textContent: d.status }))));
  const busy = data.some((d) => !["ready", "failed"].includes(d.status));
  clearTimeout(state.poll);
  if (busy) state.poll = setTimeout(loadDocs, 1000);
}

async function addDocument(body, headers = {}) {
  try {
    await api(`/v1/kbs/${encodeURIComponent(state.kb)}/documents`, { method: "POST", body, headers });
  } catch (error) {
    alert(error.message);
  }
  await loadDocs();
  await loadKbs();
}

function renderAnswer(result) {
  const bubble = el("div", { className: `msg assistant${result.abstained ? " abstained" : ""}` });
  for (const part of result.message.split(/(\[\d+\])/)) {
    const match = part.match(/^\[(\d+)\]$/);
    if (match) {
      const link = el("a", { className: "cite", textContent: part, href: "#" });
      link.onclick = (event) => { event.preventDefault(); flashSource(match[1]); };
      bubble.append(link);
    } else bubble.append(part);
  }
  $("messages").append(bubble);
  $("sources").replaceChildren(...(result.sources.length ? result.sources.map((s) =>
    el("div", { className: "source", id: `source-${s.number}` },
      el("div", { className: "meta", textContent: `[${s.number}] ${s.source} · chunk ${s.chunk_index + 1}` +
        (s.page ? ` · page ${s.page}` : "") + ` · ${Math.round(s.relevance_score * 100)}%` }),
      el("div", { textContent: s.text }),
      s.verified === false ? el("div", { className: "unverified", textContent: "citation not supported by this text" }) : ""))
    : [el("p", { className: "hint", textContent: "No sources were cited." })]));
  const context = result.context || { included: [], dropped: [] };
  $("manifest-body").replaceChildren(
    el("p", { textContent: `${context.included.length} included, ${context.dropped.length} dropped` }),
    ...context.included.map((i) => el("div", { textContent: `✓ ${i.filename} (${i.kind}, ${i.chars} chars) ${i.reason}` })),
    ...context.dropped.map((i) => el("div", { textContent: `✗ ${i.filename} (${i.kind}) ${i.reason}` })));
  $("messages").scrollTop = $("messages").scrollHeight;
}

function flashSource(number) {
  const node = $(`source-${number}`);
  if (!node) return;
  node.scrollIntoView({ behavior: "smooth", block: "center" });
  node.classList.add("flash");
  setTimeout(() => node.classList.remove("flash"), 1200);
}

$("kb-form").onsubmit = async (event) => {
  event.preventDefault();
  const name = $("kb-name").value.trim();
  try { await api("/v1/kbs", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name }) }); }
  catch (error) { alert(error.message); return; }
  $("kb-name").value = "";
  await selectKb(name);
};

$("upload-file").onchange = async () => {
  const file = $("upload-file").files[0];
  if (!file) return;
  const form = new FormData();
  form.append("file", file);
  await addDocument(form);
  $("upload-file").value = "";
};

$("url-button").onclick = async () => {
  const url = $("url-input").value.trim();
  if (!url) return;
  await addDocument(JSON.stringify({ url }), { "Content-Type": "application/json" });
  $("url-input").value = "";
};

$("chat-form").onsubmit = async (event) => {
  event.preventDefault();
  if (!state.kb) { alert("Select a knowledge base first."); return; }
  const text = $("chat-input").value.trim();
  if (!text) return;
  $("messages").append(el("div", { className: "msg user", textContent: text }));
  $("chat-input").value = "";
  $("chat-send").disabled = true;
  try {
    const result = await api("/v1/chat", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ message: text, kb_ids: [state.kb], conversation_id: state.conversationId }) });
    state.conversationId = result.conversation_id;
    renderAnswer(result);
  } catch (error) {
    $("messages").append(el("div", { className: "msg assistant abstained", textContent: `Error: ${error.message}` }));
  } finally {
    $("chat-send").disabled = false;
  }
};

loadKbs().catch((error) => { $("chat-hint").textContent = `Cannot reach the API: ${error.message}`; });
