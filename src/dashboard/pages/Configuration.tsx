import { useState, type FormEvent } from "react";
import { gql } from "../api.js";
import { useCaps } from "../context.js";
import { ConfirmButton, ErrorBox, fmtTime, Loading, NotAvailable, Section, short, Table, useLoad } from "../ui.js";

/** A small form whose fields are sent as the mutation's input; empty fields are left out. */
interface FormField {
  name: string;
  label: string;
  required?: boolean;
  type?: string;
  /** A choice instead of free text (value, label). */
  options?: [string, string][];
}

function MutationForm({ title, fields, submit, done }: { title: string; fields: FormField[]; submit: (values: Record<string, string>) => Promise<string>; done: () => void }) {
  const [values, setValues] = useState<Record<string, string>>({});
  const [error, setError] = useState<string>();
  const [ok, setOk] = useState<string>();
  const onSubmit = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    setOk(undefined);
    try {
      const given = Object.fromEntries(Object.entries(values).filter(([, v]) => v.trim() !== ""));
      setOk(await submit(given));
      setValues({});
      done();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <form className="form" onSubmit={onSubmit}>
      <h3>{title}</h3>
      {fields.map((f) => (
        <label key={f.name}>
          {f.label}
          {f.options ? (
            <select name={f.name} required={f.required} value={values[f.name] ?? ""} onChange={(e) => setValues({ ...values, [f.name]: e.target.value })}>
              <option value="">Choose…</option>
              {f.options.map(([value, label]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          ) : f.type === "textarea" ? (
            <textarea name={f.name} value={values[f.name] ?? ""} onChange={(e) => setValues({ ...values, [f.name]: e.target.value })} />
          ) : (
            <input name={f.name} required={f.required} type={f.type ?? "text"} value={values[f.name] ?? ""} onChange={(e) => setValues({ ...values, [f.name]: e.target.value })} />
          )}
        </label>
      ))}
      <button type="submit">{title}</button>
      <ErrorBox error={error} />
      {ok && <p className="ok">{ok}</p>}
    </form>
  );
}

/** Why the casino's players could not log in last time its key set was fetched (CASINO_KEYS_UNAVAILABLE). */
function KeySetFailure({ failure }: { failure: { jwksUrl: string; message: string; failedAt: string } | null }) {
  if (!failure) return <>–</>;
  return (
    <span data-testid="key-set-failure" title={failure.jwksUrl}>
      {new Date(failure.failedAt).toLocaleString()}: {failure.message}
    </span>
  );
}

function Casinos() {
  const caps = useCaps();
  // A hub without the key-set failure table (an older schema) still lists its casinos.
  const failures = caps.query.has("hubJwkSetFailureByCasinoId");
  const casinos = useLoad(async () => {
    const data = await gql<{ allHubCasinos: { nodes: any[] } }>(
      `query HubDashboardCasinos { allHubCasinos(orderBy: NAME_ASC) { nodes { id name baseUrl graphqlUrl isPlayground createdAt hubCurrenciesByCasinoId { nodes { key displayUnitName displayUnitScale } }${
        failures ? " hubJwkSetFailureByCasinoId { jwksUrl message failedAt }" : ""
      } } } }`,
    );
    return data.allHubCasinos.nodes;
  }, [failures]);
  const m = (name: string) => caps.mutation.has(name);
  const casinoChoice: FormField = { name: "casinoId", label: "Casino", required: true, options: (casinos.data ?? []).map((c) => [c.id, c.name]) };
  return (
    <Section title="Casinos and currencies">
      <Loading when={casinos.loading && !casinos.data} />
      <ErrorBox error={casinos.error} />
      <Table
        testId="casinos"
        head={["Name", "Base URL", "GraphQL URL", "Currencies", ...(failures ? ["Last key-set failure"] : []), "Id"]}
        rows={(casinos.data ?? []).map((c) => [
          <>
            {c.name}
            {c.isPlayground && <span className="chip">playground</span>}
          </>,
          c.baseUrl || "–",
          c.graphqlUrl || "–",
          c.hubCurrenciesByCasinoId.nodes.map((cur: any) => `${cur.key} (${cur.displayUnitScale} base units = 1 ${cur.displayUnitName})`).join(", ") || "–",
          ...(failures ? [<KeySetFailure failure={c.hubJwkSetFailureByCasinoId} />] : []),
          <code title={c.id}>{short(c.id)}</code>,
        ])}
      />
      <div className="forms">
        {m("hubAddCasino") && (
          <MutationForm
            title="Add a casino"
            fields={[
              { name: "name", label: "Name", required: true },
              { name: "baseUrl", label: "Base URL (its tokens' keys at <base>/.well-known/jwks.json)" },
              { name: "graphqlUrl", label: "GraphQL URL" },
              { name: "apiKey", label: "Its API key for the controller (stored, never shown again)", type: "password" },
            ]}
            submit={async (input) => {
              const data = await gql(`mutation HubDashboardAddCasino($input: HubAddCasinoInput!) { hubAddCasino(input: $input) { casinoId } }`, { input });
              return `Added casino ${data.hubAddCasino.casinoId}.`;
            }}
            done={casinos.reload}
          />
        )}
        {m("hubSetCasinoAuth") && (
          <MutationForm
            title="Set a casino's token keys"
            fields={[
              casinoChoice,
              { name: "jwksUrl", label: "JWKS URL" },
              { name: "jwtPublicKey", label: "Or a public key (PEM or JWK)", type: "textarea" },
              { name: "jwtIssuer", label: "Required iss (optional)" },
              { name: "jwtAudience", label: "Required aud (optional)" },
            ]}
            submit={async (input) => {
              await gql(`mutation HubDashboardCasinoAuth($input: HubSetCasinoAuthInput!) { hubSetCasinoAuth(input: $input) { casinoId } }`, { input });
              return "Saved.";
            }}
            done={casinos.reload}
          />
        )}
        {m("hubAddCurrency") && (
          <MutationForm
            title="Add a currency"
            fields={[
              casinoChoice,
              { name: "key", label: "Key (e.g. BTC)", required: true },
              { name: "displayUnitName", label: "Display unit name", required: true },
              { name: "displayUnitScale", label: "Base units per display unit", required: true, type: "number" },
            ]}
            submit={async (input) => {
              await gql(`mutation HubDashboardAddCurrency($input: HubAddCurrencyInput!) { hubAddCurrency(input: $input) { key } }`, {
                input: { ...input, displayUnitScale: Number(input.displayUnitScale) },
              });
              return `Added ${input.key}.`;
            }}
            done={casinos.reload}
          />
        )}
        {m("hubCreditBankroll") && (
          <MutationForm
            title="Credit a house bankroll"
            fields={[
              casinoChoice,
              { name: "currencyKey", label: "Currency key", required: true },
              { name: "amount", label: "Amount (whole base units)", required: true, type: "number" },
              { name: "reason", label: "Reason (kept in the ledger)", required: true },
            ]}
            submit={async (input) => {
              const data = await gql(`mutation HubDashboardCreditBankroll($input: HubBankrollChangeInput!) { hubCreditBankroll(input: $input) { amount } }`, {
                input: { ...input, amount: Number(input.amount) },
              });
              return `The bankroll is now ${data.hubCreditBankroll.amount}.`;
            }}
            done={casinos.reload}
          />
        )}
      </div>
    </Section>
  );
}

function ApiKeys() {
  const caps = useCaps();
  const [created, setCreated] = useState<{ id: string; key: string }>();
  const [error, setError] = useState<string>();
  const keys = useLoad(async () => (await gql<{ allHubApiKeys: { nodes: any[] } }>(`query HubDashboardKeys { allHubApiKeys(orderBy: PRIMARY_KEY_DESC) { nodes { id createdAt lastUsedAt revokedAt } } }`)).allHubApiKeys.nodes, []);
  const canCreate = caps.mutation.has("hubCreateApiKey");
  const canRevoke = caps.mutation.has("hubRevokeApiKey");
  return (
    <Section
      title="API keys"
      actions={
        canCreate && (
          <button
            onClick={async () => {
              setError(undefined);
              try {
                const data = await gql(`mutation HubDashboardCreateKey { hubCreateApiKey { apiKeyId apiKey } }`);
                setCreated({ id: data.hubCreateApiKey.apiKeyId, key: data.hubCreateApiKey.apiKey });
                keys.reload();
              } catch (e) {
                setError((e as Error).message);
              }
            }}
          >
            Create a key
          </button>
        )
      }
    >
      <ErrorBox error={error ?? keys.error} />
      {created && (
        <div className="once" data-testid="new-key">
          <p>
            New key <code>{short(created.id)}</code>. Copy it now: the hub keeps only its digest and will not show it again.
          </p>
          <input readOnly value={created.key} aria-label="New API key" onFocus={(e) => e.target.select()} />
          <button onClick={() => setCreated(undefined)}>Done</button>
        </div>
      )}
      <Table
        testId="api-keys"
        head={["Id", "Created", "Last used", "State", ""]}
        rows={(keys.data ?? []).map((k) => [
          <code title={k.id}>{short(k.id)}</code>,
          fmtTime(k.createdAt),
          fmtTime(k.lastUsedAt),
          k.revokedAt ? `revoked ${fmtTime(k.revokedAt)}` : "active",
          !k.revokedAt && canRevoke ? (
            <ConfirmButton
              label="Revoke"
              question="Revoke this key? Requests with it are refused from now on (this page's own key too, if it is this one)."
              onConfirm={async () => {
                await gql(`mutation HubDashboardRevokeKey($id: UUID!) { hubRevokeApiKey(input: { apiKeyId: $id }) { id } }`, { id: k.id });
                keys.reload();
              }}
            />
          ) : (
            ""
          ),
        ])}
      />
      {!canCreate && <p className="muted">Creating and revoking keys from here needs hubCreateApiKey and hubRevokeApiKey; use hub api-key create / revoke.</p>}
    </Section>
  );
}

export function Configuration() {
  const caps = useCaps();
  if (!caps.query.has("allHubCasinos")) return <NotAvailable what="Configuration" needs={["allHubCasinos"]} />;
  return (
    <div className="stack">
      <h1>Configuration</h1>
      <Casinos />
      <ApiKeys />
    </div>
  );
}
