/**
 * Placeholder for the browser playground (`/`) and kernel lab (`/lab`); the web build replaces this file.
 * The server mounts whatever `webRoutes()` returns after its API routes.
 * @module
 */
import { Hono } from "hono";

export function webRoutes(): Hono {
  const app = new Hono();
  app.get("/", (c) =>
    c.html(
      "<!doctype html><title>Flint</title><h1>Flint</h1><p>The playground is not built yet. " +
        "The API is up: see <a href=\"/health\">/health</a> and <a href=\"/v1/models\">/v1/models</a>.</p>",
    ));
  return app;
}
