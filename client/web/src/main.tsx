import { render } from 'preact';
import { App } from './app';
import { registerServiceWorker } from './notify';

render(<App />, document.getElementById('app')!);
registerServiceWorker();
