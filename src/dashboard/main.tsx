import { StrictMode, useEffect, useState, type FormEvent } from "react";
import { createRoot } from "react-dom/client";
import { checkKey, closeLiveClient, forgetKey, loadCapabilities, storedKey, storeKey, whenKeyRefused, type Capabilities } from "./api.js";
import { CapsContext } from "./context.js";
import { ErrorBox } from "./ui.js";
import { Overview } from "./pages/Overview.js";
import { Players } from "./pages/Players.js";
import { Bets } from "./pages/Bets.js";
import { Transfers } from "./pages/Transfers.js";
import { Configuration } from "./pages/Configuration.js";
import { Chat } from "./pages/Chat.js";
import "./style.css";

const PAGES = [
  { id: "overview", title: "Overview" },
  { id: "players", title: "Players" },
  { id: "bets", title: "Bets" },
  { id: "transfers", title: "Transfers" },
  { id: "chat", title: "Chat" },
  { id: "config", title: "Configuration" },
] as const;

/** #/page/arg…: the page and its arguments (a player id, a bet). */
function useRoute(): string[] {
  const read = () => window.location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return route;
}

function Login({ onLogin, message }: { onLogin: (caps: Capabilities) => void; message?: string | undefined }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState<string | undefined>(message);
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const trimmed = key.trim().replace(/^apikey:/, "");
    if (!trimmed) return setError("Type the operator API key (hub api-key create prints one).");
    setBusy(true);
    setError(undefined);
    try {
      await checkKey(trimmed);
      const caps = await loadCapabilities(trimmed);
      storeKey(trimmed);
      onLogin(caps);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main className="login">
      <form onSubmit={submit} className="card">
        <h1>Hub dashboard</h1>
        <p className="muted">Sign in with an operator API key. It stays in this tab only (session storage) and is sent in the Authorization header.</p>
        <label>
          API key
          <input name="apiKey" type="password" autoComplete="off" value={key} onChange={(e) => setKey(e.target.value)} autoFocus />
        </label>
        <button type="submit" disabled={busy}>
          {busy ? "Checking…" : "Sign in"}
        </button>
        <ErrorBox error={error} />
      </form>
    </main>
  );
}

function App() {
  const [caps, setCaps] = useState<Capabilities | null>(null);
  const [restoring, setRestoring] = useState(storedKey() !== null);
  const [message, setMessage] = useState<string>();
  const route = useRoute();

  const logout = (why?: string) => {
    forgetKey();
    closeLiveClient();
    setCaps(null);
    setMessage(why);
  };
  useEffect(() => {
    whenKeyRefused((m) => logout(`The hub no longer accepts this key: ${m}`));
    const key = storedKey();
    if (!key) return;
    // A reload of the tab: the key is still in session storage.
    checkKey(key)
      .then(() => loadCapabilities(key))
      .then(setCaps, (e: Error) => logout(e.message))
      .finally(() => setRestoring(false));
  }, []);

  if (restoring) return <p className="muted">Loading…</p>;
  if (!caps) return <Login onLogin={(c) => (setMessage(undefined), setCaps(c))} message={message} />;
  const [page = "overview", ...args] = route;
  return (
    <CapsContext.Provider value={caps}>
      <header className="top">
        <strong className="brand">Hub</strong>
        <nav>
          {PAGES.map((p) => (
            <a key={p.id} href={`#/${p.id}`} className={page === p.id ? "active" : ""}>
              {p.title}
            </a>
          ))}
        </nav>
        <button className="link" onClick={() => logout()}>
          Sign out
        </button>
      </header>
      <main className="page">
        {page === "overview" && <Overview />}
        {page === "players" && <Players userId={args[0]} />}
        {page === "bets" && <Bets betType={args[0]} betId={args[1]} />}
        {page === "transfers" && <Transfers />}
        {page === "chat" && <Chat experienceId={args[0]} />}
        {page === "config" && <Configuration />}
      </main>
    </CapsContext.Provider>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
