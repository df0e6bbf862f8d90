/**
 * dbaas reclaims a crashed provisioning at once (issue 20): a replica that stays up notices that
 * the process that created a `provisioning` record is gone (its lease freed) and removes its role
 * and record within seconds, with the grace period and the reconciler interval far away.
 */
import { ServiceBroker } from "moleculer";
import { waitFor } from "../support/platform";
import type { NatsPlatform } from "../support/nats-platform";
import {
  accountRecords,
  callerMeta,
  existing,
  killMidProvision,
  spawnDbaasBeside,
  startDbaasNatsPlatform,
  stopDbaasPlatform,
  withClient,
} from "./dbaas.helpers";

describe("dbaas reclaim", () => {
  let platform: NatsPlatform;
  let client: ServiceBroker;
  // Neither the grace period nor the periodic pass can explain a removal within the test.
  const slow = { DBAAS_RECONCILE_S: "3600", DBAAS_RECONCILE_GRACE_S: "3600" };

  beforeAll(async () => {
    platform = await startDbaasNatsPlatform({ local: ["dbaas"], env: slow }); // the replica that stays up
    client = platform.local!.broker;
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas reclaim - SIGKILL of a replica mid-provision: the surviving replica removes its role and record at once, not after the grace period", async () => {
    const meta = callerMeta();
    const replica = await spawnDbaasBeside(platform, slow);
    const crashed = await killMidProvision(platform, replica, meta);
    expect(crashed.status).toBe("provisioning");
    await waitFor(
      async () => (await existing({ roles: [crashed.username] })).length === 0 && (await accountRecords(platform, meta.caller.clientId)).length === 0,
      {
        timeoutMs: 15_000,
        message: "the surviving replica to reclaim the crashed provisioning",
      },
    );
  });

  it("dbaas reclaim - DBAAS_RECONCILE_GRACE_S (here 3600) is the grace of a live owner's stuck record: 30 minutes stays, 2 hours goes", async () => {
    const meta = callerMeta();
    const stuck = async (age: string) => {
      const db = await client.call<{ id: string; username: string }, object>("dbaas.create", {}, { meta });
      await withClient(platform.databaseUrl, (c) =>
        c.query(`UPDATE dbaas.databases SET status = 'destroying', updated_at = now() - interval '${age}' WHERE id = $1`, [db.id]),
      );
      return db;
    };
    const [recent, old] = [await stuck("30 minutes"), await stuck("2 hours")];
    expect(await client.call("dbaas.reconcile", {})).toMatchObject({ recordsDeleted: 1 });
    expect(await existing({ roles: [recent.username, old.username] })).toEqual([recent.username]);
  });
});
