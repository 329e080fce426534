import { randomBytes } from 'node:crypto';

/** A fresh access token for a server started without one (192 random bits, URL-safe). */
export function generateToken(): string {
  return randomBytes(24).toString('base64url');
}
