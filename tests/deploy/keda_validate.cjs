// Validate KEDA ScaledObjects (JSON array on stdin) with the CRD-derived validators of the npm
// package @kubernetes-models/keda (installed by scripts/install-deploy-tools.sh). Prints one line
// per object: "ok NAME" or "invalid NAME: errors"; exits 1 when any is invalid.
"use strict";
const { ScaledObject } = require("@kubernetes-models/keda/keda.sh/v1alpha1");
const docs = JSON.parse(require("fs").readFileSync(0, "utf8"));
let failed = 0;
for (const doc of docs) {
  const name = (doc.metadata && doc.metadata.name) || "?";
  try {
    new ScaledObject(doc).validate();
    console.log(`ok ${name}`);
  } catch (err) {
    failed += 1;
    console.log(`invalid ${name}: ${err.message}`);
  }
}
process.exit(failed ? 1 : 0);
