/**
 * TLS to Postgres (docs/deployment.md, "TLS to Postgres"): a Postgres of the
 * test's own that accepts only TLS (pg_hba.conf `hostssl` only, `ssl = on`,
 * a certificate signed by a CA the test makes with openssl). With
 * `sslmode=verify-full` (and `require`) and `sslrootcert` in the URLs, every
 * connection the hub opens is encrypted: its pools, the transfer worker, the
 * LISTEN connection (seen in pg_stat_ssl) and the migrations' connection
 * (the server accepts no other). A wrong CA stops the start with HUB_DB_TLS
 * naming the variable, the CA file and the verification failure.
 */
import "./helpers/env.js";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import pg from "pg";
import { startAndListen } from "@hubpkg/hub";
import { startExternalPostgres } from "./helpers/external-postgres.js";
import { makePlayer } from "./helpers/credentials.js";
import { gql } from "./helpers/http.js";
import { tmpDir } from "./helpers/tmp.js";

const openssl = (dir: string, ...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });

/** A CA, and a server certificate it signs for 127.0.0.1; a second, unrelated CA. */
function makeCertificates(dir: string): { ca: string; wrongCa: string; cert: string; key: string } {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl(dir, "req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=hub test CA", "-addext", "basicConstraints=critical,CA:TRUE");
  openssl(dir, "req", "-x509", ...ec, "-keyout", "wrong-ca.key", "-out", "wrong-ca.pem", "-days", "2", "-subj", "/CN=another CA", "-addext", "basicConstraints=critical,CA:TRUE");
  openssl(dir, "req", ...ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1");
  fs.writeFileSync(path.join(dir, "san.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  openssl(dir, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.cnf");
  return { ca: path.join(dir, "ca.pem"), wrongCa: path.join(dir, "wrong-ca.pem"), cert: path.join(dir, "server.crt"), key: path.join(dir, "server.key") };
}

const withParams = (url: string, params: Record<string, string>) => {
  const u = new URL(url);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
};

t.test("every connection of the hub to a TLS-only Postgres is encrypted; a wrong CA stops the start", async (t) => {
  const dataDir = tmpDir(t);
  const certs = makeCertificates(tmpDir(t));
  const pgServer = await startExternalPostgres(t, dataDir);
  // TLS on, and pg_hba.conf accepting TLS connections only; files owned by whoever runs the cluster.
  const owner = fs.statSync(pgServer.clusterDir);
  for (const [from, to] of [[certs.cert, "server.crt"], [certs.key, "server.key"]] as const) {
    const target = path.join(pgServer.clusterDir, to);
    fs.copyFileSync(from, target);
    fs.chmodSync(target, 0o600);
    fs.chownSync(target, owner.uid, owner.gid);
  }
  fs.appendFileSync(path.join(pgServer.clusterDir, "postgresql.conf"), "\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n");
  fs.writeFileSync(path.join(pgServer.clusterDir, "pg_hba.conf"), "hostssl all all 127.0.0.1/32 scram-sha-256\n");
  await pgServer.stop();
  await pgServer.start();

  const plain = new pg.Client({ connectionString: withParams(pgServer.superuserUrl, { sslmode: "disable" }) });
  await t.rejects(plain.connect(), /no encryption/, "the server refuses a connection without TLS");

  const tls = (url: string, mode: string, ca = certs.ca) => withParams(url, { sslmode: mode, sslrootcert: ca });
  const base = { port: 0, handleSignals: false, logLevel: "silent" as const, dataDir: tmpDir(t) };
  for (const mode of ["verify-full", "require"]) {
    const server = await startAndListen({
      ...base,
      databaseUrl: tls(pgServer.authenticatorUrl, mode),
      superuserDatabaseUrl: tls(pgServer.superuserUrl, mode),
      // The migrations' own connection, and LISTEN, on this URL.
      directDatabaseUrl: tls(pgServer.superuserUrl, mode),
    });
    try {
      const player = await makePlayer(tls(pgServer.superuserUrl, mode), `tls-${mode}`);
      t.same((await gql(server.url, "{ hubCurrentUser { id } }", {}, player.header)).body.data, { hubCurrentUser: { id: player.userId } }, `${mode}: GraphQL answers`);
      const observer = new pg.Client({ connectionString: tls(pgServer.superuserUrl, mode) });
      await observer.connect();
      try {
        const { rows } = await observer.query<{ name: string; ssl: boolean }>(
          "select a.application_name as name, s.ssl from pg_stat_ssl s join pg_stat_activity a using (pid) where a.application_name like 'hub:%' order by 1",
        );
        const names = new Set(rows.map((r) => r.name));
        for (const name of ["hub:graphql", "hub:superuser", "hub:credentials", "hub:transfers", "hub:live-notifications"]) t.ok(names.has(name), `${mode}: ${name} is connected`);
        t.ok(rows.every((r) => r.ssl), `${mode}: every hub connection is encrypted (${rows.length})`);
      } finally {
        await observer.end();
      }
    } finally {
      await server.stop();
    }
  }

  const password = new URL(pgServer.superuserUrl).password;
  const wrong = await startAndListen({
    ...base,
    databaseUrl: tls(pgServer.authenticatorUrl, "verify-full", certs.wrongCa),
    superuserDatabaseUrl: tls(pgServer.superuserUrl, "verify-full", certs.wrongCa),
  }).then(
    () => t.fail("started with a CA that did not sign the server's certificate") as never,
    (error: Error & { code?: string }) => error,
  );
  t.equal(wrong.code, "HUB_DB_TLS");
  t.match(wrong.message, /^Cannot connect to SUPERUSER_DATABASE_URL \(.*\): the server's TLS certificate did not verify against the CA file .*wrong-ca\.pem \(sslrootcert\): .*(SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE)/);
  t.notMatch(wrong.message, password, "no password in the message");

  const missing = path.join(certs.ca, "..", "no-such-ca.pem");
  const unreadable = await startAndListen({ ...base, databaseUrl: tls(pgServer.authenticatorUrl, "verify-full"), superuserDatabaseUrl: tls(pgServer.superuserUrl, "verify-full", missing) }).then(
    () => t.fail("started with a CA file that does not exist") as never,
    (error: Error & { code?: string }) => error,
  );
  t.equal(unreadable.code, "HUB_DB_TLS");
  t.match(unreadable.message, /^SUPERUSER_DATABASE_URL \(.*\) names a TLS file that cannot be read: sslrootcert=.*no-such-ca\.pem/);
  t.notMatch(unreadable.message, password);
});
