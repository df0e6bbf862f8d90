/** The database routes' responses (lib/contract.ts): published in the OpenAPI document and typing the handlers. */
import { type Static, Type } from "../../lib/contract";

export const DatabaseCreated = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    databaseName: Type.String({ pattern: "^client_[a-z0-9]{8}_[0-9a-f]{8}$" }),
    host: Type.String(),
    port: Type.Integer(),
    username: Type.String({ pattern: "^user_[0-9a-f]{12}$" }),
    password: Type.String({ description: "Shown once only" }),
    connectionString: Type.String({ format: "uri", description: "postgresql://username:password@host:port/databaseName" }),
    pooledConnectionString: Type.Optional(
      Type.String({ format: "uri", description: "The same role and password through the pooler (transaction mode); present when the platform runs one" }),
    ),
    status: Type.Optional(
      Type.Literal("restoring", {
        description: "A point-in-time restore (answered 202): the data is being restored; the detail says when it is active or failed",
      }),
    ),
  },
  { $id: "DatabaseCreated" },
);
export type DatabaseCreated = Static<typeof DatabaseCreated>;

export const PasswordRotated = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    username: Type.String({ pattern: "^user_[0-9a-f]{12}$" }),
    password: Type.String({ description: "Shown once only; the previous one no longer works" }),
    connectionString: Type.String({ format: "uri" }),
    pooledConnectionString: Type.Optional(
      Type.String({ format: "uri", description: "The same role and password through the pooler (transaction mode); present when the platform runs one" }),
    ),
  },
  { $id: "PasswordRotated" },
);
export type PasswordRotated = Static<typeof PasswordRotated>;

export const Database = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    databaseName: Type.String(),
    host: Type.String(),
    port: Type.Integer(),
    username: Type.String(),
    storageMb: Type.Number({ description: "MiB, 2 decimals" }),
    maxStorageMb: Type.Number(),
    createdAt: Type.String({ format: "date-time" }),
    readOnly: Type.Optional(Type.Boolean({ description: "Over its quota: read-only until back under" })),
    status: Type.Optional(
      Type.Union([Type.Literal("active"), Type.Literal("restoring"), Type.Literal("failed")], {
        description: "restoring: a point-in-time restore still filling the database; failed: it could not (statusReason says why; destroy it)",
      }),
    ),
    statusReason: Type.Optional(Type.String({ description: "Why a restore failed" })),
    pooledHost: Type.Optional(Type.String({ description: "The pooler's host (transaction mode); present when the platform runs one" })),
    pooledPort: Type.Optional(Type.Integer()),
    restoreWindow: Type.Optional(
      Type.Object(
        { earliest: Type.String({ format: "date-time" }), latest: Type.String({ format: "date-time" }) },
        { description: "The moments restoreFrom may name for this database; absent without point-in-time restore or before its first base backup" },
      ),
    ),
    extensions: Type.Optional(
      Type.Object(
        {
          available: Type.Array(Type.String(), { description: "What the owner may CREATE EXTENSION here (the operator's allow-list, installed ones)" }),
          installed: Type.Array(Type.String(), { description: "Extensions created in the database (plpgsql left out)" }),
        },
        { description: "Absent when the database server cannot be asked right now" },
      ),
    ),
  },
  { $id: "Database" },
);
export type DatabaseDetail = Static<typeof Database>;

export const DatabaseList = Type.Object({ databases: Type.Array(Database) }, { $id: "DatabaseList" });

export const Message = Type.Object({ message: Type.String() }, { $id: "Message" });
export type Message = Static<typeof Message>;

export const Snapshot = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    databaseId: Type.String({ format: "uuid", description: "The database it was taken of (which may since have been destroyed)" }),
    databaseName: Type.String(),
    status: Type.Union([Type.Literal("pending"), Type.Literal("ready"), Type.Literal("failed")]),
    sizeMb: Type.Number({ description: "Size of the dump in MiB (2 decimals); 0 until ready" }),
    createdAt: Type.String({ format: "date-time" }),
  },
  { $id: "Snapshot" },
);
export type SnapshotDetail = Static<typeof Snapshot>;

export const SnapshotList = Type.Object({ snapshots: Type.Array(Snapshot) }, { $id: "SnapshotList" });
