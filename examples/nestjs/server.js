// A small payments service on NestJS, made idempotent with @node-idempotency/nestjs 1.0.4 (the
// NestJS interceptor of node-idempotency, which its README calls "RFC compliant": the IETF
// Idempotency-Key draft), used as its README says: NodeIdempotencyModule.forRootAsync with the
// memory storage, and @Idempotent() on the controller. The options are the ones a careful user
// sets: a key is required (enforceIdempotency) and at most 255 characters, the longest key the
// spec (openapi.yaml) can declare. It is here to show `idemgen conform` on a service written
// without idemgen, in another language and another error vocabulary (NestJS's
// {"statusCode", "message"}); docs/conform.md records what conform reports for it.
//
//   node server.js [port]     (default 8089; 0 picks a free one, printed on stdout)
//
// Written in plain JavaScript: the decorators are applied as functions, which is what
// TypeScript compiles `@Post()` to. Tenants are `Authorization: Bearer <tenant>`. Test knobs:
// X-Test-Delay (milliseconds) makes a handler slow, X-Test-Fail: 500 makes it fail after its
// work. GET /_effects prints how many payments and refunds were made.
'use strict';

require('reflect-metadata');
const {
  Module, Controller, Post, Get, Body, Headers, Res, HttpCode,
  BadRequestException, UnauthorizedException, InternalServerErrorException,
} = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { NodeIdempotencyModule, Idempotent } = require('@node-idempotency/nestjs');

const effects = { payments: 0, refunds: 0 };
let seq = 0;

function tenantOf(headers) {
  const m = /^Bearer\s+(\S+)$/i.exec(headers.authorization || '');
  return m ? m[1] : '';
}

// work is a handler's business part: the tenant, the delay knob, the effect, the fail knob.
async function work(headers, res, table, make) {
  if (!tenantOf(headers)) {
    throw new UnauthorizedException('no credentials');
  }
  const delay = parseInt(headers['x-test-delay'] || '0', 10);
  if (delay > 0) {
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
  const resource = make();
  if (!resource) {
    throw new BadRequestException('invalid request');
  }
  effects[table]++;
  if (headers['x-test-fail'] === '500') {
    throw new InternalServerErrorException('injected failure');
  }
  res.location('/v1/' + table + '/' + resource.id);
  return resource;
}

class PaymentsController {
  async createPayment(body, headers, res) {
    return work(headers, res, 'payments', () => {
      const b = body || {};
      if (!Number.isInteger(b.amount) || b.amount < 1 || b.amount > 1000000 || !['EUR', 'USD'].includes(b.currency)) {
        return null;
      }
      return { id: 'pay_' + ++seq, amount: b.amount, currency: b.currency };
    });
  }

  async createRefund(body, headers, res) {
    return work(headers, res, 'refunds', () => {
      const b = body || {};
      if (!Number.isInteger(b.amount) || b.amount < 1 || typeof b.payment !== 'string') {
        return null;
      }
      return { id: 're_' + ++seq, payment: b.payment, amount: b.amount };
    });
  }
}

for (const [method, path] of [['createPayment', 'payments'], ['createRefund', 'refunds']]) {
  const proto = PaymentsController.prototype;
  Body()(proto, method, 0);
  Headers()(proto, method, 1);
  Res({ passthrough: true })(proto, method, 2);
  Reflect.decorate([Post(path), HttpCode(201)], proto, method, Object.getOwnPropertyDescriptor(proto, method));
}
Reflect.decorate([Controller('v1'), Idempotent()], PaymentsController);

class EffectsController {
  effects() {
    return effects;
  }
}
Reflect.decorate([Get('_effects')], EffectsController.prototype, 'effects',
  Object.getOwnPropertyDescriptor(EffectsController.prototype, 'effects'));
Reflect.decorate([Controller()], EffectsController);

class AppModule {}
Reflect.decorate([Module({
  imports: [NodeIdempotencyModule.forRootAsync({
    storage: { adapter: 'memory' },
    enforceIdempotency: true,
    keyMaxLength: 255,
  })],
  controllers: [PaymentsController, EffectsController],
})], AppModule);

async function main() {
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(parseInt(process.argv[2] || '8089', 10), '127.0.0.1');
  const { port } = app.getHttpServer().address();
  console.log('listening on http://127.0.0.1:' + port);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
