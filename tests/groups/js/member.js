// One KafkaJS group member for tests/groups/test_kafkajs.py.
// Prints "A p,p,..." when the group assigns it partitions, "R partition offset" for every record it
// processes, "C partition offset" once its commit of offset+1 succeeded (before taking the next one), and
// leaves the group on SIGTERM. The bootstrap argument may list several brokers, comma-separated.
// "CRASH <error> <restart>" when KafkaJS's runner crashes; KAFKAJS_LOG_LEVEL=DEBUG logs KafkaJS to stderr.
// KAFKAJS_CONSUMER_RETRIES sets the consumer's retry count (KafkaJS's default, 5, when unset).
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, groupId, topic, clientId] = process.argv.slice(2)
const level = logLevel[process.env.KAFKAJS_LOG_LEVEL || 'NOTHING']
// KafkaJS's default logger writes debug lines to stdout, which carries this script's protocol: use stderr
const toStderr = () => ({ namespace, label, log }) => process.stderr.write(JSON.stringify({ label, namespace, ...log }) + '\n')
const kafka = new Kafka({ clientId, brokers: bootstrap.split(','), logLevel: level, logCreator: toStderr })
// maxWaitTimeInMs below the session timeout: KafkaJS only heartbeats between fetches
const retries = process.env.KAFKAJS_CONSUMER_RETRIES
const consumer = kafka.consumer({
  groupId, sessionTimeout: 3000, heartbeatInterval: 300, rebalanceTimeout: 10000, maxWaitTimeInMs: 200,
  ...(retries ? { retry: { retries: Number(retries) } } : {})
})
const out = (line) => process.stdout.write(line + '\n')

async function main () {
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    const parts = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
    out('A ' + parts.join(','))
  })
  consumer.on(consumer.events.CRASH, (e) => {
    out(`CRASH ${e.payload.error && e.payload.error.name}:${e.payload.error && e.payload.error.message} ${e.payload.restart}`)
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      out(`R ${partition} ${message.offset}`)
      await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
      out(`C ${partition} ${message.offset}`)
    }
  })
}

let stopping = false
process.on('SIGTERM', async () => {
  if (stopping) return
  stopping = true
  try { await consumer.disconnect() } finally { out('BYE'); process.exit(0) }
})
main().catch((e) => { out('ERR ' + e.message); process.exit(1) })
