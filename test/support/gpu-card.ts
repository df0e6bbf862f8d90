/** A GPU card as a heartbeat announces it, idle, for tests that make nodes up. */
import type { GpuCard } from "../../lib/gpu-protocol";

export const testCard = (uuid: string, index: number, name = "Test GPU", memoryTotal = 1024): GpuCard => ({
  uuid,
  index,
  name,
  memoryTotal,
  memoryUsed: 0,
  utilization: 0,
  temperature: 40,
});
