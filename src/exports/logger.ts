export { logger, type Logger } from "../logger.js";
