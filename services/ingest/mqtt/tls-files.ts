import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import type { Config } from '../../../shared/config.js';
import { ConfigError } from '../../../shared/errors.js';

/** What MQTT.js hands to tls.connect: a private CA to trust, and a client certificate and key for mutual TLS. */
export interface MqttTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

type TlsVariable = 'MQTT_CA_FILE' | 'MQTT_CERT_FILE' | 'MQTT_KEY_FILE';

function invalid(variable: string, detail: string): ConfigError {
  return new ConfigError(`Invalid configuration: ${variable}: ${detail}`);
}

function readFile(variable: TlsVariable, file: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'a directory, not a file' : (code ?? 'unreadable');
    throw invalid(variable, `cannot read ${file} (${why})`);
  }
}

/** The PEM certificates of a file (a CA file may be a bundle); none parsed is refused. */
function certificates(variable: TlsVariable, file: string, pem: Buffer): X509Certificate[] {
  const blocks = pem.toString('utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw invalid(variable, `${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch {
      throw invalid(variable, `${file}: certificate ${i + 1} of ${blocks.length} is not a valid PEM certificate`);
    }
  });
}

function privateKey(file: string, pem: Buffer): KeyObject {
  try {
    return createPrivateKey(pem);
  } catch {
    throw invalid('MQTT_KEY_FILE', `${file} is not an unencrypted PEM private key`);
  }
}

/**
 * The TLS files of an mqtts:// MQTT_URL, read and checked once at start (docs/operations.md
 * "MQTT over TLS"): each must be readable and hold what its variable names, and a client key must
 * belong to its certificate. A problem stops the process with one line naming the variable, not a
 * TLS handshake that fails again on every reconnection. Undefined when none is set.
 */
export function readMqttTls(config: Pick<Config, TlsVariable>): MqttTls | undefined {
  const tls: MqttTls = {};
  if (config.MQTT_CA_FILE) {
    tls.ca = readFile('MQTT_CA_FILE', config.MQTT_CA_FILE);
    certificates('MQTT_CA_FILE', config.MQTT_CA_FILE, tls.ca);
  }
  if (config.MQTT_CERT_FILE && config.MQTT_KEY_FILE) {
    tls.cert = readFile('MQTT_CERT_FILE', config.MQTT_CERT_FILE);
    tls.key = readFile('MQTT_KEY_FILE', config.MQTT_KEY_FILE);
    const [leaf] = certificates('MQTT_CERT_FILE', config.MQTT_CERT_FILE, tls.cert);
    if (!leaf!.checkPrivateKey(privateKey(config.MQTT_KEY_FILE, tls.key))) {
      throw invalid('MQTT_KEY_FILE', `${config.MQTT_KEY_FILE} is not the private key of the certificate in MQTT_CERT_FILE`);
    }
  }
  return Object.keys(tls).length > 0 ? tls : undefined;
}
