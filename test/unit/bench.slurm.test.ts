/** bench:slurm's readings of what the jobs and Slurm wrote: pure, no Slurm and no platform. */
import { jobCompStates, printedStart } from "../../bench/slurm/sides";

const line = (id: number, state: string) =>
  `JobId=${id} UserId=root(0) GroupId=root(0) Name=wrap JobState=${state} Partition=bench TimeLimit=UNLIMITED StartTime=2026-11-25T07:27:18 EndTime=2026-11-25T07:27:22 NodeList=vm ExitCode=0:0`;

describe("bench slurm", () => {
  it.each([
    ["a job's start in nanoseconds", "1795591639035667119\n", 1795591639035.667],
    ["the first line only", "1795591639035667119\nextra\n", 1795591639035.667],
    ["surrounding blanks", "  1795591639000000000  ", 1795591639000],
  ])("bench slurm - printed start: %s", (_name, output, ms) => {
    expect(printedStart(output, "j")).toBeCloseTo(ms, 3);
  });

  it.each([
    ["empty output (the job never ran)", ""],
    ["an error instead of the time", "sh: date: not found"],
    ["seconds only", "1795591639"],
    ["a number with a sign", "-1795591639035667119"],
  ])("bench slurm - printed start refused: %s", (_name, output) => {
    expect(() => printedStart(output, "j7")).toThrow(/job j7 printed/);
  });

  it.each([
    ["no log yet", "", {}],
    ["two completed", `${line(1, "COMPLETED")}\n${line(2, "COMPLETED")}\n`, { "1": "COMPLETED", "2": "COMPLETED" }],
    ["a failed one kept as failed", `${line(3, "FAILED")}\n${line(4, "COMPLETED")}`, { "3": "FAILED", "4": "COMPLETED" }],
    ["a half-written last line is skipped", `${line(5, "COMPLETED")}\nJobId=6 UserId=ro`, { "5": "COMPLETED" }],
    ["a field ending in JobState is not the state", "JobId=7 Name=wrap OldJobState=RUNNING JobState=TIMEOUT", { "7": "TIMEOUT" }],
  ])("bench slurm - job completion log: %s", (_name, log, states) => {
    expect(Object.fromEntries(jobCompStates(log))).toEqual(states);
  });
});
