import { natsConnectionOptions } from "../../lib/channels";

describe("platform - NATS connection options for channels", () => {
  const cases: Array<[string, string, object]> = [
    ["plain", "nats://127.0.0.1:4222", { servers: ["127.0.0.1:4222"] }],
    ["several servers", "nats://a:4222,nats://b:4222", { servers: ["a:4222", "b:4222"] }],
    ["user and password", "nats://ci:s%40cret@nats:4222", { servers: ["nats:4222"], user: "ci", pass: "s@cret" }],
    ["token", "nats://tok123@nats:4222", { servers: ["nats:4222"], token: "tok123" }],
  ];
  it.each(cases)("%s", (_name, url, expected) => {
    expect(natsConnectionOptions(url)).toEqual({ ...expected, noAsyncTraces: true });
  });
});
