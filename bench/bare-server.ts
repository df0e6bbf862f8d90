/**
 * The baseline for bench:gateway: a bare node:http server doing what GET /api/auth/me does —
 * the same token check (HS256 JWT, or API key / restricted token SHA-256 lookup) and the same PostgreSQL reads on
 * the platform's own tables — with none of the platform around it.
 */
import http from "http";
import { Pool } from "pg";
import { verifyAccessToken } from "../lib/jwt";
import { hashApiKey } from "../services/auth/api-keys";

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
const secret = process.env.JWT_SECRET!;

async function clientIdOf(req: http.IncomingMessage): Promise<string | null> {
  const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "")?.[1];
  if (!token) return null;
  if (token.startsWith("cit_")) {
    const { rows } = await pool.query("SELECT client_id FROM auth.tokens WHERE token_hash = $1 AND expires_at > now()", [hashApiKey(token)]);
    return rows[0]?.client_id ?? null;
  }
  if (token.startsWith("ci_")) {
    const { rows } = await pool.query("SELECT c.id, c.role FROM auth.api_keys k JOIN auth.clients c ON c.id = k.client_id WHERE k.key_hash = $1", [
      hashApiKey(token),
    ]);
    return rows[0]?.id ?? null;
  }
  const claims = verifyAccessToken(token, secret);
  return "error" in claims ? null : claims.sub;
}

async function answer(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  try {
    const id = await clientIdOf(req);
    if (!id) {
      res.writeHead(401).end();
      return;
    }
    const { rows } = await pool.query("SELECT id, email, name, role FROM auth.clients WHERE id = $1", [id]);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(rows[0]));
  } catch {
    res.writeHead(500).end();
  }
}

http.createServer((req, res) => void answer(req, res)).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("bare server ready"));
