// A small payments service in Node.js, made idempotent with express-idempotency (the most
// downloaded Express idempotency middleware on npm), used as its README says: the middleware
// on every POST, the handler returning early on a hit, reportError when the work fails. It
// serves openapi.yaml; `idemgen conform` checks it from outside (README.md here, and
// docs/conform.md for what it reports).
//
//   node server.js [port]     (default 8088; 0 picks a free one, printed on stdout)
//
// Tenants are `Authorization: Bearer <tenant>`. Test knobs, as idemgen's conformance service
// has them: X-Test-Delay: 300ms makes a handler slow, X-Test-Fail: 500 makes it fail after
// its work. GET /_effects prints how many payments and refunds were made.
'use strict';

const express = require('express');
const { idempotency, getSharedIdempotencyService } = require('express-idempotency');

const app = express();
app.use(express.json());
app.post('*', idempotency());

const effects = { payments: 0, refunds: 0 };
let seq = 0;

function tenantOf(req) {
  const m = /^Bearer\s+(\S+)$/i.exec(req.get('Authorization') || '');
  return m ? m[1] : '';
}

// work runs a handler's business part the way the library expects: nothing on a hit, the
// delay knob, the effect, then the fail knob (reportError frees the key, as its README says).
async function work(req, res, table, make) {
  const service = getSharedIdempotencyService();
  if (service.isHit(req)) {
    return;
  }
  if (!tenantOf(req)) {
    res.status(401).json({ error: 'unauthenticated' });
    return;
  }
  const delay = parseInt(req.get('X-Test-Delay') || '0', 10);
  if (delay > 0) {
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
  const body = req.body || {};
  const resource = make(body);
  if (!resource) {
    res.status(400).json({ error: 'invalid request' });
    return;
  }
  effects[table]++;
  if (req.get('X-Test-Fail') === '500') {
    await service.reportError(req);
    res.status(500).json({ error: 'injected failure' });
    return;
  }
  res.status(201).location('/v1/' + table + '/' + resource.id).json(resource);
}

app.post('/v1/payments', (req, res, next) => {
  work(req, res, 'payments', (b) => {
    if (!Number.isInteger(b.amount) || b.amount < 1 || !['EUR', 'USD'].includes(b.currency)) {
      return null;
    }
    return { id: 'pay_' + ++seq, amount: b.amount, currency: b.currency };
  }).catch(next);
});

app.post('/v1/refunds', (req, res, next) => {
  work(req, res, 'refunds', (b) => {
    if (!Number.isInteger(b.amount) || b.amount < 1 || typeof b.payment !== 'string') {
      return null;
    }
    return { id: 're_' + ++seq, payment: b.payment, amount: b.amount };
  }).catch(next);
});

app.get('/_effects', (req, res) => res.json(effects));

const server = app.listen(parseInt(process.argv[2] || '8088', 10), '127.0.0.1', () => {
  console.log('listening on http://127.0.0.1:' + server.address().port);
});
