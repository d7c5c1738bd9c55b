// KafkaJS side of tests/integration/test_security_clients.py.
//
// Reads one JSON job from stdin. Each connection is {brokers, ssl: {ca, cert, key} (file paths, optional),
// sasl: {mechanism, username, password} (optional)}.
//
// * {mode: "cells", cells: {name: connection}, topic, values}: for each cell, creates the topic `${topic}-${name}`
//   (1 partition, replication factor 3) with the admin client, produces the values with acks=-1, reads them back
//   with a consumer in a group (until it has them all or 20 s pass) and lists the topic's offsets (admin).
//   Prints {name: {read: [value], offsets: [{partition, high}]} | {error, message}}.
// * {mode: "run", connection, topic, prefix, stopFile, maxSeconds}: sends `${prefix}${i}` to partition 0 one at a
//   time with acks=-1 until stopFile exists or maxSeconds pass, printing each value on its own line as it is
//   acknowledged; a send that fails after KafkaJS' retries is not printed (their count goes to stderr).
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

async function readStdin () {
  const chunks = []
  for await (const c of process.stdin) chunks.push(c)
  return JSON.parse(Buffer.concat(chunks).toString())
}

function client (connection, clientId) {
  const options = { clientId, brokers: connection.brokers, logLevel: logLevel.NOTHING,
    retry: { retries: 8, initialRetryTime: 200, maxRetryTime: 2000 } }
  if (connection.sasl) options.sasl = connection.sasl
  if (connection.ssl) {
    options.ssl = { ca: [fs.readFileSync(connection.ssl.ca)] }
    if (connection.ssl.cert) {
      options.ssl.cert = fs.readFileSync(connection.ssl.cert)
      options.ssl.key = fs.readFileSync(connection.ssl.key)
    }
  }
  return new Kafka(options)
}

async function cell (connection, topic, values) {
  const kafka = client(connection, `kafkajs-${topic}`)
  const admin = kafka.admin()
  await admin.connect()
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 3 }], waitForLeaders: true })
    const producer = kafka.producer()
    await producer.connect()
    await producer.send({ topic, acks: -1, messages: values.map((v) => ({ value: v, partition: 0 })) })
    await producer.disconnect()
    const read = []
    const consumer = kafka.consumer({ groupId: `kafkajs-${topic}`, maxWaitTimeInMs: 100 })
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, 20000)
      consumer.run({
        eachMessage: async ({ message }) => {
          read.push(message.value.toString())
          if (read.length >= values.length) { clearTimeout(timer); resolve() }
        }
      })
    })
    await consumer.disconnect()
    const offsets = (await admin.fetchTopicOffsets(topic)).map((o) => ({ partition: o.partition, high: Number(o.high) }))
    return { read, offsets }
  } finally {
    await admin.disconnect()
  }
}

async function run (job) {
  const kafka = client(job.connection, `kafkajs-run-${job.prefix}`)
  const producer = kafka.producer()
  await producer.connect()
  let failed = 0
  const deadline = Date.now() + job.maxSeconds * 1000
  for (let i = 0; !fs.existsSync(job.stopFile) && Date.now() < deadline; i++) {
    const value = `${job.prefix}${i}`
    try {
      await producer.send({ topic: job.topic, acks: -1, messages: [{ value, partition: 0 }] })
      process.stdout.write(value + '\n')
    } catch (e) {
      failed++
    }
  }
  await producer.disconnect()
  process.stderr.write(`failed sends: ${failed}\n`)
}

async function main () {
  const job = await readStdin()
  if (job.mode === 'run') {
    await run(job)
    return
  }
  const out = {}
  for (const [name, connection] of Object.entries(job.cells)) {
    try {
      out[name] = await cell(connection, `${job.topic}-${name}`, job.values)
    } catch (e) {
      out[name] = { error: e.name, message: e.message }
    }
  }
  process.stdout.write(JSON.stringify(out))
}

main().catch((e) => { process.stderr.write(String(e.stack || e)); process.exit(1) })
