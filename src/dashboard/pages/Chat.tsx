import { useState, type FormEvent } from "react";
import { gql, uuidTime } from "../api.js";
import { useCaps } from "../context.js";
import { ConfirmButton, ErrorBox, fmtTime, Loading, NotAvailable, Section, Table, useLoad } from "../ui.js";

/**
 * Chat moderation, per experience: its recent messages (hidden ones too),
 * hiding, muting and unmuting their authors, mods and system messages.
 * Message bodies are whatever players typed: they are only ever rendered as
 * React text, never as HTML.
 */
interface Message {
  id: string;
  type: "user" | "system";
  body: string;
  userId: string | null;
  hiddenAt: string | null;
  hubUserByUserId: { uname: string } | null;
}
interface Mute {
  id: string;
  userId: string;
  expiredAt: string | null;
  reason: string | null;
  revokedAt: string | null;
  hubUserByUserId: { uname: string } | null;
}

const RECENT = 100;

/** A random UUID (v4); crypto.randomUUID exists only on https or localhost pages. */
function newClientId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
const MUTE_FOR = [
  { label: "10 minutes", ms: 10 * 60_000 },
  { label: "1 hour", ms: 3_600_000 },
  { label: "1 day", ms: 86_400_000 },
  { label: "until unmuted", ms: 0 },
];

export function Chat({ experienceId }: { experienceId?: string | undefined }) {
  const caps = useCaps();
  const needs = ["allHubExperiences", "hubExperienceById", "hubChatMuteUser", "hubChatHideMessage"];
  const experiences = useLoad(async () => {
    const data = await gql<{ list: { nodes: { id: string; name: string; hubCasinoByCasinoId: { name: string } | null }[] } }>(
      "query HubDashboardChatExperiences { list: allHubExperiences(orderBy: PRIMARY_KEY_ASC, first: 500) { nodes { id name hubCasinoByCasinoId { name } } } }",
    );
    return data.list.nodes;
  }, []);
  if (!caps.query.has("allHubExperiences") || !caps.query.has("hubExperienceById") || !caps.mutation.has("hubChatMuteUser")) {
    return (
      <div className="stack">
        <h1>Chat</h1>
        <NotAvailable what="Chat moderation" needs={needs} />
      </div>
    );
  }
  return (
    <div className="stack">
      <h1>Chat</h1>
      <Loading when={experiences.loading && !experiences.data} />
      <ErrorBox error={experiences.error} />
      {experiences.data && (
        <label>
          Experience{" "}
          <select aria-label="Experience" value={experienceId ?? ""} onChange={(e) => (window.location.hash = e.target.value ? `#/chat/${encodeURIComponent(e.target.value)}` : "#/chat")}>
            <option value="">Choose…</option>
            {experiences.data.map((x) => (
              <option key={x.id} value={x.id}>
                {x.hubCasinoByCasinoId?.name ?? "?"} / {x.name}
              </option>
            ))}
          </select>
        </label>
      )}
      {experienceId && <Room experienceId={experienceId} />}
    </div>
  );
}

function Room({ experienceId }: { experienceId: string }) {
  const room = useLoad(async () => {
    const data = await gql<{
      x: { messages: { nodes: Message[] }; mods: { nodes: { userId: string; hubUserByUserId: { uname: string } | null }[] }; mutes: { nodes: Mute[] } } | null;
    }>(
      `query HubDashboardChatRoom($id: UUID!) {
        x: hubExperienceById(id: $id) {
          messages: hubChatMessagesByExperienceId(orderBy: ID_DESC, first: ${RECENT}) { nodes { id type body userId hiddenAt hubUserByUserId { uname } } }
          mods: hubChatModsByExperienceId(orderBy: ID_ASC) { nodes { userId hubUserByUserId { uname } } }
          mutes: hubChatMutesByExperienceId(orderBy: ID_DESC, first: 50) { nodes { id userId expiredAt reason revokedAt hubUserByUserId { uname } } }
        }
      }`,
      { id: experienceId },
    );
    return data.x;
  }, [experienceId]);
  if (room.loading && !room.data) return <Loading when />;
  if (room.error) return <ErrorBox error={room.error} />;
  if (!room.data) return <p className="muted">No experience has this id.</p>;
  const { messages, mods, mutes } = room.data;
  const now = Date.now();
  const inForce = mutes.nodes.filter((m) => !m.revokedAt && (!m.expiredAt || Date.parse(m.expiredAt) > now));
  const mutedIds = new Set(inForce.map((m) => m.userId));
  const modIds = new Set(mods.nodes.map((m) => m.userId));
  return (
    <>
      <SystemMessage experienceId={experienceId} onSent={room.reload} />
      <Section title={`Recent messages (${messages.nodes.length})`} actions={<button onClick={room.reload}>Refresh</button>}>
        <Table
          testId="chat-messages"
          empty="No message yet."
          head={["Time", "From", "Message", "", ""]}
          rows={messages.nodes.map((m) => [
            fmtTime(new Date(uuidTime(m.id)).toISOString()),
            m.type === "system" ? <em>system</em> : <a href={`#/players/${m.userId}`}>{m.hubUserByUserId?.uname ?? m.userId}</a>,
            <span className={m.hiddenAt ? "muted chat-body" : "chat-body"} data-testid="chat-body">
              {m.body}
              {m.hiddenAt ? ` (hidden ${fmtTime(m.hiddenAt)})` : ""}
            </span>,
            <HideButton message={m} onDone={room.reload} />,
            m.userId ? <ModerateButtons userId={m.userId} muted={mutedIds.has(m.userId)} mod={modIds.has(m.userId)} experienceId={experienceId} onDone={room.reload} /> : "",
          ])}
        />
      </Section>
      <Section title={`Mods (${mods.nodes.length})`}>
        <Table
          testId="chat-mods"
          empty="No mod. Make a player a mod from one of their messages."
          head={["Player", ""]}
          rows={mods.nodes.map((m) => [
            <a href={`#/players/${m.userId}`}>{m.hubUserByUserId?.uname ?? m.userId}</a>,
            <ConfirmButton label="Remove mod" question="Remove this mod?" onConfirm={() => modChange("hubChatRemoveMod", experienceId, m.userId).then(room.reload)} />,
          ])}
        />
      </Section>
      <Section title={`Mutes in force (${inForce.length})`}>
        <Table
          testId="chat-mutes"
          empty="Nobody is muted."
          head={["Player", "Until", "Reason", ""]}
          rows={inForce.map((m) => [
            <a href={`#/players/${m.userId}`}>{m.hubUserByUserId?.uname ?? m.userId}</a>,
            m.expiredAt ? fmtTime(m.expiredAt) : "unmuted by hand",
            m.reason ?? "–",
            <ConfirmButton label="Unmute" question="Unmute this player?" danger={false} onConfirm={() => unmute(m.userId).then(room.reload)} />,
          ])}
        />
      </Section>
    </>
  );
}

const modChange = (field: "hubChatAddMod" | "hubChatRemoveMod", experienceId: string, userId: string) =>
  gql(`mutation HubDashboardChatMod($i: ${field === "hubChatAddMod" ? "HubChatAddModInput" : "HubChatRemoveModInput"}!) { ${field}(input: $i) { __typename } }`, { i: { experienceId, userId } });
const unmute = (userId: string) => gql("mutation HubDashboardChatUnmute($i: HubChatUnmuteUserInput!) { hubChatUnmuteUser(input: $i) { chatMute { id } } }", { i: { userId } });

function HideButton({ message, onDone }: { message: Message; onDone: () => void }) {
  const hide = !message.hiddenAt;
  return (
    <ConfirmButton
      label={hide ? "Hide" : "Show"}
      question={hide ? "Hide this message from players?" : "Show this message again?"}
      danger={hide}
      onConfirm={() => gql("mutation HubDashboardChatHide($i: HubChatHideMessageInput!) { hubChatHideMessage(input: $i) { chatMessage { id } } }", { i: { chatMessageId: message.id, hidden: hide } }).then(onDone)}
    />
  );
}

function ModerateButtons({ userId, muted, mod, experienceId, onDone }: { userId: string; muted: boolean; mod: boolean; experienceId: string; onDone: () => void }) {
  const [open, setOpen] = useState(false);
  const [reason, setReason] = useState("");
  const [forMs, setForMs] = useState(MUTE_FOR[1]!.ms);
  const [error, setError] = useState<string>();
  const mute = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    try {
      const expiredAt = forMs ? new Date(Date.now() + forMs).toISOString() : null;
      await gql("mutation HubDashboardChatMute($i: HubChatMuteUserInput!) { hubChatMuteUser(input: $i) { chatMute { id } } }", { i: { userId, expiredAt, reason: reason.trim() || null } });
      setOpen(false);
      onDone();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <span className="row">
      {muted ? (
        <ConfirmButton label="Unmute" question="Unmute this player?" danger={false} onConfirm={() => unmute(userId).then(onDone)} />
      ) : open ? (
        <form onSubmit={mute} className="row" aria-label="Mute">
          <select aria-label="Mute for" value={forMs} onChange={(e) => setForMs(Number(e.target.value))}>
            {MUTE_FOR.map((m) => (
              <option key={m.ms} value={m.ms}>
                {m.label}
              </option>
            ))}
          </select>
          <input aria-label="Reason" placeholder="Reason (optional)" maxLength={500} value={reason} onChange={(e) => setReason(e.target.value)} />
          <button type="submit" className="danger">
            Mute in the casino
          </button>
          <button type="button" onClick={() => setOpen(false)}>
            Cancel
          </button>
        </form>
      ) : (
        <button onClick={() => setOpen(true)}>Mute…</button>
      )}
      {mod ? null : <ConfirmButton label="Make mod" question="Let this player mute others in this experience?" danger={false} onConfirm={() => modChange("hubChatAddMod", experienceId, userId).then(onDone)} />}
      <ErrorBox error={error} />
    </span>
  );
}

function SystemMessage({ experienceId, onSent }: { experienceId: string; onSent: () => void }) {
  const [body, setBody] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const send = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await gql("mutation HubDashboardChatSystem($i: HubChatCreateSystemMessageInput!) { hubChatCreateSystemMessage(input: $i) { chatMessage { id } } }", {
        i: { experienceId, body, clientId: newClientId() },
      });
      setBody("");
      onSent();
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Section title="System message">
      <form onSubmit={send} className="row">
        <input aria-label="System message" placeholder="A message to every player of this experience" maxLength={500} value={body} onChange={(e) => setBody(e.target.value)} />
        <button type="submit" disabled={busy || body.trim() === ""}>
          Post
        </button>
      </form>
      <ErrorBox error={error} />
    </Section>
  );
}
