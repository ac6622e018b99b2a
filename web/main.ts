/**
 * Browser entry (bundled into app.js by web/build.ts): points the engine at the shaders next to the bundle,
 * then starts the page named by `<body data-page>`.
 * @module
 */
import { setShaderBase } from "../src/platform/mod.ts";
import { startLab } from "./lab.ts";
import { startPlayground } from "./playground.ts";

// app.js and wgsl/ sit side by side in both the static build and the server's routes.
setShaderBase(new URL("./wgsl/", import.meta.url));

const page = document.body.dataset.page;
if (page === "lab") startLab();
else startPlayground();
