import type { Migration } from "../../lib/db";

export const migrations: Migration[] = [
  {
    version: 1,
    name: "client databases and the instance marker",
    sql: `
      -- One row: the marker this platform writes on every role and database it creates on the
      -- tenant server, so the reconciler never touches another platform's objects.
      CREATE TABLE instance (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        singleton boolean NOT NULL DEFAULT true UNIQUE CHECK (singleton)
      );
      INSERT INTO instance DEFAULT VALUES;

      -- Never the password: it is shown once and only the server keeps its SCRAM verifier.
      CREATE TABLE databases (
        id uuid PRIMARY KEY,
        client_id text NOT NULL,
        database_name text NOT NULL UNIQUE,
        username text NOT NULL UNIQUE,
        status text NOT NULL CHECK (status IN ('provisioning', 'active', 'destroying')),
        storage_bytes bigint,
        measured_at timestamptz,
        max_storage_mb integer NOT NULL CHECK (max_storage_mb > 0),
        read_only boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX databases_client_idx ON databases (client_id, created_at DESC);
      CREATE INDEX databases_status_idx ON databases (status, updated_at);

      -- Records the intent to provision unless the account is at its limit, in one round trip.
      -- A per-account lock serialises count-then-insert; being VOLATILE, the count after the lock
      -- sees every insert committed before it.
      CREATE FUNCTION record_intent(p_id uuid, p_client_id text, p_database_name text, p_username text,
                                    p_max_storage_mb integer, p_limit integer) RETURNS boolean
      LANGUAGE plpgsql VOLATILE AS $fn$
      BEGIN
        PERFORM pg_advisory_xact_lock(hashtext('ci-platform:dbaas:account:' || p_client_id));
        IF (SELECT count(*) FROM dbaas.databases
             WHERE client_id = p_client_id AND status IN ('provisioning', 'active')) >= p_limit THEN
          RETURN false;
        END IF;
        INSERT INTO dbaas.databases (id, client_id, database_name, username, status, max_storage_mb)
        VALUES (p_id, p_client_id, p_database_name, p_username, 'provisioning', p_max_storage_mb);
        RETURN true;
      END
      $fn$;
    `,
  },
  {
    version: 2,
    name: "records owned by a live process",
    sql: `
      -- The process working on a provisioning or destroying record (owner-lease.ts). It holds a
      -- session advisory lock keyed by this id while it lives; PostgreSQL frees the lock the moment
      -- its connection dies, so a record whose lock is free belongs to a crashed process.
      ALTER TABLE databases ADD COLUMN owner uuid;

      CREATE FUNCTION owner_alive(p_owner uuid) RETURNS boolean LANGUAGE sql STABLE AS $fn$
        SELECT p_owner IS NOT NULL AND EXISTS (
          SELECT 1 FROM pg_catalog.pg_locks
           WHERE locktype = 'advisory' AND granted AND objsubid = 2
             AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
             AND classid = hashtext('ci-platform:dbaas:owner')::oid AND objid = hashtext(p_owner::text)::oid)
      $fn$;

      -- As version 1, but a provisioning whose process died no longer counts towards the limit
      -- (records without an owner predate this version and count as before).
      DROP FUNCTION record_intent(uuid, text, text, text, integer, integer);
      CREATE FUNCTION record_intent(p_id uuid, p_client_id text, p_database_name text, p_username text,
                                    p_max_storage_mb integer, p_limit integer, p_owner uuid) RETURNS boolean
      LANGUAGE plpgsql VOLATILE AS $fn$
      BEGIN
        PERFORM pg_advisory_xact_lock(hashtext('ci-platform:dbaas:account:' || p_client_id));
        IF (SELECT count(*) FROM dbaas.databases
             WHERE client_id = p_client_id
               AND (status = 'active' OR (status = 'provisioning' AND (owner IS NULL OR dbaas.owner_alive(owner))))) >= p_limit THEN
          RETURN false;
        END IF;
        INSERT INTO dbaas.databases (id, client_id, database_name, username, status, max_storage_mb, owner)
        VALUES (p_id, p_client_id, p_database_name, p_username, 'provisioning', p_max_storage_mb, p_owner);
        RETURN true;
      END
      $fn$;
    `,
  },
  {
    version: 3,
    name: "catalog hidden per database",
    sql: `
      -- Databases provisioned before the catalog was hidden get it hidden by the reconciler.
      ALTER TABLE databases ADD COLUMN catalog_hidden boolean NOT NULL DEFAULT false;
    `,
  },
  {
    version: 4,
    name: "catalog level per database",
    sql: `
      -- The catalog level applied in each database (DBAAS_HIDE_CATALOG: off, sessions or all);
      -- NULL: not known, and the reconciler applies the configured level (which also converges any
      -- database whose level differs from the configured one).
      ALTER TABLE databases ADD COLUMN catalog_level text CHECK (catalog_level IN ('off', 'sessions', 'all'));
      -- Until now a database was hidden entirely (catalog_hidden) or not at all.
      UPDATE databases SET catalog_level = CASE WHEN catalog_hidden THEN 'all' ELSE 'off' END, catalog_hidden = true
       WHERE status = 'active';
      -- No longer read. The previous version hid everything where it is false: this version sets it
      -- to true on every database it records a level for, so during a rolling update replicas
      -- still running the previous version leave those databases alone.
      COMMENT ON COLUMN databases.catalog_hidden IS 'unused since migration 4 (see catalog_level); true fences off the previous version';
    `,
  },
  {
    version: 5,
    name: "snapshots",
    sql: `
      -- A pg_dump of a client database, owned by the account; it outlives the database (database_id
      -- is kept as a plain value, no foreign key) until the account deletes it. The dump itself
      -- lives in the snapshot store (snapshot-store.ts) under the snapshot's id.
      CREATE TABLE snapshots (
        id uuid PRIMARY KEY,
        client_id text NOT NULL,
        database_id uuid NOT NULL,
        database_name text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'ready', 'failed')),
        size_bytes bigint,
        -- The process taking it (owner-lease.ts): a pending snapshot whose owner died is failed.
        owner uuid,
        failure text,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX snapshots_client_idx ON snapshots (client_id, created_at DESC);
    `,
  },
  {
    version: 6,
    name: "intent within the account's storage quota",
    sql: `
      -- As record_intent (version 2), and within the account's storage quota when one is given
      -- (p_storage_limit_mb, MiB; NULL: none): what the account's live databases may grow to
      -- (their max_storage_mb) plus its ready snapshots, with the new database's maximum, must fit.
      -- Answers 'recorded', 'databases' (at the count limit) or 'storage:<MiB used>'.
      -- record_intent stays for replicas of the previous version during a rolling update.
      CREATE FUNCTION record_intent_within(p_id uuid, p_client_id text, p_database_name text, p_username text,
                                           p_max_storage_mb integer, p_limit integer, p_owner uuid,
                                           p_storage_limit_mb integer) RETURNS text
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE live integer; used numeric;
      BEGIN
        PERFORM pg_advisory_xact_lock(hashtext('ci-platform:dbaas:account:' || p_client_id));
        SELECT count(*), coalesce(sum(max_storage_mb), 0) INTO live, used FROM dbaas.databases
         WHERE client_id = p_client_id
           AND (status = 'active' OR (status = 'provisioning' AND (owner IS NULL OR dbaas.owner_alive(owner))));
        IF live >= p_limit THEN RETURN 'databases'; END IF;
        IF p_storage_limit_mb IS NOT NULL THEN
          used := used + (SELECT coalesce(sum(size_bytes), 0) FROM dbaas.snapshots
                           WHERE client_id = p_client_id AND status = 'ready') / 1048576.0;
          IF used + p_max_storage_mb > p_storage_limit_mb THEN RETURN 'storage:' || ceil(used); END IF;
        END IF;
        INSERT INTO dbaas.databases (id, client_id, database_name, username, status, max_storage_mb, owner)
        VALUES (p_id, p_client_id, p_database_name, p_username, 'provisioning', p_max_storage_mb, p_owner);
        RETURN 'recorded';
      END
      $fn$;
    `,
  },
  {
    version: 7,
    name: "login roles of GPU jobs",
    sql: `
      -- One row per login role made for a GPU job's attempt (job-roles.ts), written before the
      -- role is created and deleted once it is dropped: a crash in between leaves a row, and
      -- dbaas.revokeJobRoles (called until it succeeds) drops the role. Never the password.
      CREATE TABLE job_roles (
        role_name text PRIMARY KEY,
        job_id text NOT NULL,
        client_id text NOT NULL,
        database_id uuid NOT NULL,
        database_name text NOT NULL,
        owner_name text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX job_roles_job_idx ON job_roles (job_id);
    `,
  },
  {
    version: 8,
    name: "extension guard per database",
    sql: `
      -- The allow-list (DBAAS_EXTENSIONS) the database's extension guard enforces (extension-sql.ts);
      -- null: none yet (databases from before this version get it from the reconciler).
      ALTER TABLE databases ADD COLUMN extension_policy text;
    `,
  },
  {
    version: 9,
    name: "destroyed databases kept for point-in-time restore",
    sql: `
      -- A destroyed database can still be restored to a moment of its life within
      -- DBAAS_PITR_RETENTION_H (pitr.ts); removed once that has passed.
      CREATE TABLE destroyed_databases (
        id uuid PRIMARY KEY,
        client_id text NOT NULL,
        database_name text NOT NULL,
        created_at timestamptz NOT NULL,
        destroyed_at timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
  {
    version: 10,
    name: "restores in the background",
    sql: `
      -- A point-in-time restore answers at once and fills the new database in the background
      -- (pitr-jobs.ts): its record stays 'provisioning' (API status "restoring") with the source and
      -- the instant, and ends 'active', or 'failed' with the reason (its database and role dropped,
      -- the record kept for the account to read and delete; it holds no place in the account).
      ALTER TABLE databases DROP CONSTRAINT databases_status_check;
      ALTER TABLE databases ADD CONSTRAINT databases_status_check CHECK (status IN ('provisioning', 'active', 'destroying', 'failed'));
      ALTER TABLE databases ADD COLUMN restore_of uuid, ADD COLUMN restore_to timestamptz, ADD COLUMN status_reason text;
    `,
  },
  {
    version: 11,
    name: "the restore window starts when the database became active",
    sql: `
      -- created_at is the record's, written before CREATE DATABASE ran on the tenant server: a
      -- restore to that instant found no database. active_at: when it was made and filled. Older
      -- records keep their creation, the closest known.
      ALTER TABLE databases ADD COLUMN active_at timestamptz;
      UPDATE databases SET active_at = created_at WHERE status IN ('active', 'destroying');
      ALTER TABLE destroyed_databases ADD COLUMN active_at timestamptz;
      UPDATE destroyed_databases SET active_at = created_at;
    `,
  },
];
